// A standalone O_DIRECT read benchmark: the yardstick for the streamer's read bandwidth.
// Deliberately shares no code with the streamer's reader, so it measures the device, not us.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "errors.h"
#include "workbench_native.h"

extern "C" int32_t wb_iobench(const char * path, uint64_t read_size, int32_t lanes, uint64_t total_bytes,
                              uint64_t seed, uint64_t * bytes_out, uint64_t * ns_out) {
    return wb::guarded([&] {
        constexpr uint64_t kAlign = 4096;
        const uint64_t size = (read_size + kAlign - 1) & ~(kAlign - 1);
        struct stat st{};
        if (::stat(path, &st) != 0 || static_cast<uint64_t>(st.st_size) < 2 * size) {
            throw std::runtime_error(std::string("cannot use ") + path + " for the read benchmark");
        }
        const uint64_t slots = (static_cast<uint64_t>(st.st_size) - size) / kAlign;
        const uint64_t per_lane = total_bytes / size / static_cast<uint64_t>(lanes > 0 ? lanes : 1) + 1;
        std::atomic<uint64_t> bytes{0};
        std::atomic<bool> failed{false};
        std::vector<std::thread> threads;
        const auto start = std::chrono::steady_clock::now();
        for (int32_t lane = 0; lane < (lanes > 0 ? lanes : 1); ++lane) {
            threads.emplace_back([&, lane] {
                const int fd = ::open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
                void * buf = nullptr;
                if (fd < 0 || posix_memalign(&buf, kAlign, size) != 0) {
                    failed = true;
                    if (fd >= 0) ::close(fd);
                    return;
                }
                std::mt19937_64 rng(seed + static_cast<uint64_t>(lane));
                for (uint64_t i = 0; i < per_lane; ++i) {
                    const off_t off = static_cast<off_t>((rng() % slots) * kAlign);
                    const ssize_t n = ::pread(fd, buf, size, off);
                    if (n <= 0) { failed = true; break; }
                    bytes += static_cast<uint64_t>(n);
                }
                std::free(buf);
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
