#include <atomic>
#include <new>

#include "errors.h"
#include "llama.h"
#include "workbench_native.h"

struct wb_abort_flag {
    std::atomic<int32_t> requested{0};
    std::atomic<int32_t> fatal{0};
    std::atomic<uint64_t> polls{0};
};

namespace {

// Called by llama.cpp's compute thread after every graph node: two relaxed atomics, no locks.
bool poll_abort(void * data) {
    auto * flag = static_cast<wb_abort_flag *>(data);
    flag->polls.fetch_add(1, std::memory_order_relaxed);
    return flag->requested.load(std::memory_order_relaxed) != 0 ||
           flag->fatal.load(std::memory_order_relaxed) != 0;
}

}  // namespace

extern "C" {

wb_abort_flag * wb_abort_flag_new(void) { return new (std::nothrow) wb_abort_flag(); }

void wb_abort_flag_free(wb_abort_flag * flag) { delete flag; }

void wb_abort_flag_set(wb_abort_flag * flag, int32_t value) {
    if (flag != nullptr) {
        flag->requested.store(value, std::memory_order_relaxed);
    }
}

void wb_abort_flag_set_fatal(wb_abort_flag * flag, int32_t value) {
    if (flag != nullptr) {
        flag->fatal.store(value, std::memory_order_relaxed);
    }
}

int32_t wb_abort_flag_get_fatal(const wb_abort_flag * flag) {
    return flag != nullptr ? flag->fatal.load(std::memory_order_relaxed) : 0;
}

int32_t wb_abort_flag_get(const wb_abort_flag * flag) {
    return flag != nullptr ? flag->requested.load(std::memory_order_relaxed) : 0;
}

uint64_t wb_abort_flag_polls(const wb_abort_flag * flag) {
    return flag != nullptr ? flag->polls.load(std::memory_order_relaxed) : 0;
}

int32_t wb_abort_install(llama_context * ctx, wb_abort_flag * flag) {
    return wb::guarded([&] {
        if (ctx == nullptr || flag == nullptr) {
            throw std::invalid_argument("wb_abort_install: context and flag are required");
        }
        llama_set_abort_callback(ctx, poll_abort, flag);
        return 0;
    });
}

}  // extern "C"
