// Prefetch: reads of the next layer's likely experts on a thread of their own, while this layer
// computes (issue 24). One batch in flight at a time; the eval thread waits for it at the next
// load, before it looks anything up (so an entry is never looked up or evicted mid-read). Own
// descriptors and lanes (a FileSet of its own), so it never shares a batch with the eval thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "reader.h"

namespace wb {

class Prefetcher {
public:
    Prefetcher(const std::vector<std::string> & paths, int lanes, bool direct);
    ~Prefetcher();
    Prefetcher(const Prefetcher &) = delete;
    Prefetcher & operator=(const Prefetcher &) = delete;

    // Starts reading `jobs` (taken); the previous batch must have been waited for.
    void submit(std::vector<ReadJob> && jobs);
    // Blocks until the batch in flight (if any) is read; returns the ns waited. Throws the
    // batch's read error, if it had one.
    uint64_t wait();
    // Blocks until no batch is in flight, leaving a read error for wait() to report.
    void quiesce();
    uint64_t bytes() const { return bytes_; }     // transferred, all batches (after wait)
    uint64_t read_ns() const { return read_ns_; }  // wall time of the reads, all batches

private:
    void run();

    std::unique_ptr<FileSet> files_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::vector<ReadJob> jobs_;
    bool busy_ = false;
    bool stop_ = false;
    std::string error_;
    uint64_t bytes_ = 0, read_ns_ = 0;
    // Last: members start in declaration order, and run() must find the mutex, the condition
    // and the flags built before the thread starts (declared first, it raced their
    // construction and could miss a wake-up, hanging the eval thread in wait()).
    std::thread thread_;
};

}  // namespace wb
