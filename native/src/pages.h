// Small memory and clock helpers shared by the streamer's parts.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>

namespace wb {

inline uint64_t now_ns() {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now().time_since_epoch()).count());
}

inline size_t page_size() {
    static const size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return size;
}

// Drops the pages lying entirely inside [p, p + n): neighbours sharing a boundary page keep it.
inline void discard_inward(void * p, uint64_t n) {
    const uint64_t ps = page_size();
    const uint64_t start = (reinterpret_cast<uint64_t>(p) + ps - 1) & ~(ps - 1);
    const uint64_t end = (reinterpret_cast<uint64_t>(p) + n) & ~(ps - 1);
    if (end > start) {
        madvise(reinterpret_cast<void *>(start), end - start, MADV_DONTNEED);
    }
}

inline uint8_t * reserve(uint64_t bytes) {
    // Address space only: pages are committed by the reads that fill them. Untouched pages read
    // as zeros, so memory the kernel touches but we chose not to read is always safe.
    void * p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("cannot reserve address space for experts");
    return static_cast<uint8_t *>(p);
}

}  // namespace wb
