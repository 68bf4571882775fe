#include "reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace wb {

namespace {

constexpr uint64_t kAlign = 4096;

uint64_t align_down(uint64_t v) { return v & ~(kAlign - 1); }
uint64_t align_up(uint64_t v) { return (v + kAlign - 1) & ~(kAlign - 1); }

std::string errno_text(const char * what, const std::string & path) {
    return std::string(what) + " " + path + ": " + std::strerror(errno);
}

// pread until `size` bytes arrived or EOF; returns bytes read.
uint64_t pread_full(int fd, uint8_t * dest, uint64_t size, uint64_t offset) {
    uint64_t got = 0;
    while (got < size) {
        const ssize_t n = ::pread(fd, dest + got, size - got, static_cast<off_t>(offset + got));
        if (n < 0) {
            if (errno == EINTR) continue;
            throw std::runtime_error(std::string("pread failed: ") + std::strerror(errno));
        }
        if (n == 0) break;  // EOF
        got += static_cast<uint64_t>(n);
    }
    return got;
}

}  // namespace

FileSet::FileSet(const std::vector<std::string> & paths, int lanes, bool want_direct) {
    if (lanes < 1) lanes = 1;
    if (lanes > 8) lanes = 8;
    lanes_.resize(static_cast<size_t>(lanes));
    direct_ = want_direct;
    std::vector<uint64_t> sizes;
    for (const auto & path : paths) {
        struct stat st{};
        if (::stat(path.c_str(), &st) != 0) throw std::runtime_error(errno_text("cannot stat", path));
        sizes.push_back(static_cast<uint64_t>(st.st_size));
    }
    for (auto & lane : lanes_) {
        for (size_t f = 0; f < paths.size(); ++f) {
            const int bfd = ::open(paths[f].c_str(), O_RDONLY | O_CLOEXEC);
            if (bfd < 0) throw std::runtime_error(errno_text("cannot open", paths[f]));
            lane.buffered_fds.push_back(bfd);
            int dfd = -1;
            if (want_direct) {
                dfd = ::open(paths[f].c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
                if (dfd < 0) direct_ = false;  // the file system refuses O_DIRECT: buffered
            }
            lane.direct_fds.push_back(dfd);
        }
        ensure_bounce(lane, 1 << 20);
    }
    if (direct_) {
        for (size_t f = 0; f < paths.size() && direct_; ++f) {
            direct_ = verify_direct(lanes_[0].direct_fds[f], lanes_[0].buffered_fds[f], sizes[f]);
        }
    }
    for (size_t i = 1; i < lanes_.size(); ++i) {
        threads_.emplace_back([this, i] { worker(i); });
    }
}

FileSet::~FileSet() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    wake_.notify_all();
    for (auto & t : threads_) t.join();
    for (auto & lane : lanes_) {
        for (int fd : lane.direct_fds) if (fd >= 0) ::close(fd);
        for (int fd : lane.buffered_fds) if (fd >= 0) ::close(fd);
        std::free(lane.bounce);
    }
}

void FileSet::ensure_bounce(Lane & lane, size_t size) {
    if (lane.bounce_size >= size) return;
    std::free(lane.bounce);
    lane.bounce = nullptr;
    const size_t rounded = static_cast<size_t>(align_up(size));
    if (posix_memalign(reinterpret_cast<void **>(&lane.bounce), kAlign, rounded) != 0) {
        lane.bounce_size = 0;
        throw std::runtime_error("cannot allocate an aligned read buffer");
    }
    lane.bounce_size = rounded;
}

bool FileSet::verify_direct(int direct_fd, int buffered_fd, uint64_t file_size) {
    if (direct_fd < 0 || file_size < 2 * kAlign) return direct_fd >= 0;
    Lane & lane = lanes_[0];
    const uint64_t off = align_down(file_size / 2);
    std::vector<uint8_t> expected(kAlign);
    if (pread_full(buffered_fd, expected.data(), kAlign, off) != kAlign) return false;
    const ssize_t n = ::pread(direct_fd, lane.bounce, kAlign, static_cast<off_t>(off));
    return n == static_cast<ssize_t>(kAlign) && std::memcmp(lane.bounce, expected.data(), kAlign) == 0;
}

uint64_t FileSet::read_one(Lane & lane, const ReadJob & job) {
    const auto f = static_cast<size_t>(job.file);
    if (!direct_) {
        const uint64_t got = pread_full(lane.buffered_fds[f], job.dest, job.size, job.offset);
        if (got != job.size) throw std::runtime_error("short read: the model file is truncated");
        return got;
    }
    // O_DIRECT wants aligned offset, length and buffer.
    const uint64_t start = align_down(job.offset);
    const uint64_t end = align_up(job.offset + job.size);
    const auto dest_addr = reinterpret_cast<uint64_t>(job.dest);
    if (job.spill_ok && (dest_addr - job.offset) % kAlign == 0) {
        // The destination sits at the same place within its page as the data within the file:
        // read the aligned window straight into memory, no copy. The bytes around the slice are
        // the file's own bytes at those places, which the caller allowed us to write.
        uint8_t * window = reinterpret_cast<uint8_t *>(align_down(dest_addr));
        const uint64_t got = pread_full(lane.direct_fds[f], window, end - start, start);
        if (got >= job.offset + job.size - start) return got;
        // Past EOF: fall through to the bounce path, which finishes the tail buffered.
    }
    // Otherwise read the aligned window into the bounce buffer and copy the middle out.
    ensure_bounce(lane, static_cast<size_t>(end - start));
    uint64_t got = pread_full(lane.direct_fds[f], lane.bounce, end - start, start);
    if (got < job.offset + job.size - start) {
        // The window ran past EOF: finish the tail with a buffered read.
        const uint64_t have = got > job.offset - start ? got - (job.offset - start) : 0;
        std::memcpy(job.dest, lane.bounce + (job.offset - start), static_cast<size_t>(have));
        const uint64_t rest = pread_full(lane.buffered_fds[f], job.dest + have, job.size - have,
                                         job.offset + have);
        if (have + rest != job.size) throw std::runtime_error("short read: the model file is truncated");
        return got + rest;
    }
    std::memcpy(job.dest, lane.bounce + (job.offset - start), static_cast<size_t>(job.size));
    return got;
}

void FileSet::drain(Lane & lane, const std::vector<ReadJob> & jobs) {
    for (;;) {
        const size_t i = next_.fetch_add(1, std::memory_order_relaxed);
        if (i >= jobs.size()) break;
        if (!failed_.load(std::memory_order_relaxed)) {
            try {
                bytes_.fetch_add(read_one(lane, jobs[i]), std::memory_order_relaxed);
            } catch (const std::exception & e) {
                std::lock_guard<std::mutex> lock(mu_);
                if (!failed_.exchange(true)) error_ = e.what();
            }
        }
        if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == jobs.size()) {
            std::lock_guard<std::mutex> lock(mu_);
            finished_.notify_all();
        }
    }
}

void FileSet::worker(size_t index) {
    uint64_t seen = 0;
    for (;;) {
        const std::vector<ReadJob> * jobs = nullptr;
        {
            std::unique_lock<std::mutex> lock(mu_);
            wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
            if (!open_) continue;  // woke too late: that batch is already finished
            jobs = batch_;
            ++active_;
        }
        drain(lanes_[index], *jobs);
        {
            std::lock_guard<std::mutex> lock(mu_);
            --active_;
        }
        finished_.notify_all();
    }
}

uint64_t FileSet::read_all(const std::vector<ReadJob> & jobs) {
    if (jobs.empty()) return 0;
    bytes_.store(0);
    failed_.store(false);
    next_.store(0);
    done_.store(0);
    if (lanes_.size() > 1 && jobs.size() > 1) {
        {
            std::lock_guard<std::mutex> lock(mu_);
            batch_ = &jobs;
            open_ = true;
            ++generation_;
        }
        wake_.notify_all();
        drain(lanes_[0], jobs);
        std::unique_lock<std::mutex> lock(mu_);
        finished_.wait(lock, [&] { return done_.load() == jobs.size(); });
        open_ = false;  // no worker may join now; wait for those still inside drain()
        finished_.wait(lock, [&] { return active_ == 0; });
        batch_ = nullptr;
    } else {
        drain(lanes_[0], jobs);
    }
    if (failed_.load()) throw std::runtime_error(error_);
    return bytes_.load();
}

}  // namespace wb
