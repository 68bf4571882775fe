#include "errors.h"

#include <cstring>

#include "workbench_native.h"

namespace wb {

namespace {
thread_local std::string last_error;
}

void set_last_error(const std::string & message) { last_error = message; }
void clear_last_error() { last_error.clear(); }

int copy_out(const std::string & s, char * buf, size_t buf_size) {
    if (buf != nullptr && buf_size > 0) {
        const size_t n = s.size() < buf_size - 1 ? s.size() : buf_size - 1;
        std::memcpy(buf, s.data(), n);
        buf[n] = '\0';
    }
    return static_cast<int>(s.size());
}

}  // namespace wb

extern "C" const char * wb_last_error(void) { return wb::last_error.c_str(); }
