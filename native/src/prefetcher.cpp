#include "prefetcher.h"

#include <stdexcept>

#include "pages.h"

namespace wb {

Prefetcher::Prefetcher(const std::vector<std::string> & paths, int lanes, bool direct)
    : files_(new FileSet(paths, lanes, direct)), thread_([this] { run(); }) {}

Prefetcher::~Prefetcher() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

void Prefetcher::submit(std::vector<ReadJob> && jobs) {
    if (jobs.empty()) return;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (busy_) throw std::logic_error("a prefetch batch is already in flight");
        jobs_ = std::move(jobs);
        busy_ = true;
    }
    cv_.notify_all();
}

uint64_t Prefetcher::wait() {
    const uint64_t t0 = now_ns();
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !busy_; });
    if (!error_.empty()) {
        const std::string e = error_;
        error_.clear();
        throw std::runtime_error("prefetch read failed: " + e);
    }
    return now_ns() - t0;
}

void Prefetcher::quiesce() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !busy_; });
}

void Prefetcher::run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        cv_.wait(lock, [&] { return stop_ || busy_; });
        if (stop_ && !busy_) return;
        std::vector<ReadJob> jobs = std::move(jobs_);
        lock.unlock();
        const uint64_t t0 = now_ns();
        uint64_t got = 0;
        std::string error;
        try {
            got = files_->read_all(jobs);
        } catch (const std::exception & e) {
            error = e.what();
        }
        const uint64_t took = now_ns() - t0;
        lock.lock();
        bytes_ += got;
        read_ns_ += took;
        error_ = error;
        busy_ = false;
        cv_.notify_all();
    }
}

}  // namespace wb
