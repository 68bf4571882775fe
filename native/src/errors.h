// Errors stop at the C boundary: each export catches, records the message, and returns -1.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace wb {

void set_last_error(const std::string & message);
void clear_last_error();

// Copies s into a caller-owned buffer, always NUL-terminated; returns the full length.
int copy_out(const std::string & s, char * buf, size_t buf_size);

template <typename F>
int guarded(F && body) {
    try {
        clear_last_error();
        return body();
    } catch (const std::exception & e) {
        set_last_error(e.what());
    } catch (...) {
        set_last_error("unknown native error");
    }
    return -1;
}

}  // namespace wb
