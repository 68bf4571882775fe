// A standalone O_DIRECT read benchmark: the yardstick for the streamer's read bandwidth.
// Deliberately shares no code with the streamer's reader, so it measures the device, not us: the
// same byte ranges, the same number of threads, plain preads pulled from a shared counter.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "errors.h"
#include "workbench_native.h"

extern "C" int32_t wb_iobench(const char * path, const uint64_t * offsets, const uint64_t * sizes,
                              uint64_t n, int32_t lanes, uint64_t * bytes_out, uint64_t * ns_out) {
    return wb::guarded([&] {
        constexpr uint64_t kAlign = 4096;
        uint64_t widest = 0;
        for (uint64_t i = 0; i < n; ++i) widest = sizes[i] > widest ? sizes[i] : widest;
        const uint64_t buf_size = ((widest + 2 * kAlign) + kAlign - 1) & ~(kAlign - 1);
        std::atomic<uint64_t> next{0}, bytes{0};
        std::atomic<bool> failed{false};
        std::vector<std::thread> threads;
        const auto start = std::chrono::steady_clock::now();
        for (int32_t lane = 0; lane < (lanes > 0 ? lanes : 1); ++lane) {
            threads.emplace_back([&] {
                const int fd = ::open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
                // Anonymous memory like the streamer's regions (huge pages where the kernel gives
                // them), so both sides pay the same per-page cost of direct I/O.
                void * buf = mmap(nullptr, buf_size, PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (fd < 0 || buf == MAP_FAILED) {
                    failed = true;
                    if (fd >= 0) ::close(fd);
                    return;
                }
                madvise(buf, buf_size, MADV_HUGEPAGE);
                for (uint64_t i = next++; i < n; i = next++) {
                    const uint64_t a = offsets[i] & ~(kAlign - 1);
                    const uint64_t b = (offsets[i] + sizes[i] + kAlign - 1) & ~(kAlign - 1);
                    const ssize_t got = ::pread(fd, buf, b - a, static_cast<off_t>(a));
                    if (got <= 0) { failed = true; break; }
                    bytes += static_cast<uint64_t>(got);
                }
                munmap(buf, buf_size);
                ::close(fd);
            });
        }
        for (auto & t : threads) t.join();
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::chrono::steady_clock::now() - start).count();
        if (failed) throw std::runtime_error("O_DIRECT reads failed (does this file system support O_DIRECT?)");
        *bytes_out = bytes.load();
        *ns_out = static_cast<uint64_t>(ns);
        return 0;
    });
}
