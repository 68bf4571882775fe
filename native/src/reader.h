// Positioned reads of byte ranges from model files, with I/O lanes.
//
// One FileSet holds every shard of a model. Each lane (thread) owns one descriptor per file: an
// O_DIRECT one when the file system honours it (verified at open against a buffered read, since
// some volumes accept the flag and return wrong data) and a buffered one, plus an aligned bounce
// buffer. Lane 0 is the calling thread; lanes 1..N-1 are workers woken per batch.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace wb {

struct ReadJob {
    int32_t file;
    uint64_t offset;
    uint64_t size;
    uint8_t * dest;
    // The caller owns the pages around dest and they mirror the file's layout, so an O_DIRECT
    // window may be read straight into them (see FileSet::read_one).
    bool spill_ok = false;
};

class FileSet {
public:
    FileSet(const std::vector<std::string> & paths, int lanes, bool want_direct);
    ~FileSet();
    FileSet(const FileSet &) = delete;
    FileSet & operator=(const FileSet &) = delete;

    // Reads every job, spread over the lanes; returns when all are done. Throws on a failed read.
    // Returns the bytes actually transferred (aligned windows under O_DIRECT).
    uint64_t read_all(const std::vector<ReadJob> & jobs);

    bool direct() const { return direct_; }  // O_DIRECT in use for every file
    int lanes() const { return static_cast<int>(lanes_.size()); }

private:
    struct Lane {
        std::vector<int> direct_fds;
        std::vector<int> buffered_fds;
        uint8_t * bounce = nullptr;
        size_t bounce_size = 0;
    };

    uint64_t read_one(Lane & lane, const ReadJob & job);
    void drain(Lane & lane, const std::vector<ReadJob> & jobs);
    void worker(size_t index);
    void ensure_bounce(Lane & lane, size_t size);
    bool verify_direct(int direct_fd, int buffered_fd, uint64_t file_size);

    std::vector<Lane> lanes_;
    std::vector<std::thread> threads_;
    bool direct_ = false;

    // The batch being read: lanes claim jobs with next_; done_ counts finished ones.
    std::mutex mu_;
    std::condition_variable wake_;
    std::condition_variable finished_;
    const std::vector<ReadJob> * batch_ = nullptr;
    uint64_t generation_ = 0;
    bool open_ = false;   // workers may join the batch only while it is open
    int active_ = 0;      // workers inside drain(); the batch closes only when none are
    std::atomic<size_t> next_{0};
    std::atomic<size_t> done_{0};
    std::atomic<uint64_t> bytes_{0};
    std::atomic<bool> failed_{false};
    std::string error_;
    bool stop_ = false;
};

}  // namespace wb
