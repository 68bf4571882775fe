#include <dlfcn.h>

#include <string>

#include "build_identity.h"
#include "errors.h"
#include "llama.h"
#include "workbench_native.h"

extern "C" {

int32_t wb_abi_version(void) { return WB_ABI_VERSION; }

int32_t wb_build_llama_cpp_python_version(char * buf, size_t buf_size) {
    return wb::copy_out(WB_BUILD_LLAMA_CPP_PYTHON_VERSION, buf, buf_size);
}

int32_t wb_build_libllama_sha256(char * buf, size_t buf_size) {
    return wb::copy_out(WB_BUILD_LIBLLAMA_SHA256, buf, buf_size);
}

int32_t wb_loaded_libllama_path(char * buf, size_t buf_size) {
    return wb::guarded([&] {
        Dl_info info{};
        // Any libllama symbol we reference resolves to the library the loader bound us to.
        if (dladdr(reinterpret_cast<void *>(&llama_backend_init), &info) == 0 || info.dli_fname == nullptr) {
            throw std::runtime_error("dladdr could not locate libllama");
        }
        return wb::copy_out(info.dli_fname, buf, buf_size);
    });
}

size_t wb_sizeof_llama_context_params(void) { return sizeof(llama_context_params); }
size_t wb_sizeof_llama_model_params(void) { return sizeof(llama_model_params); }
size_t wb_sizeof_llama_batch(void) { return sizeof(llama_batch); }
size_t wb_sizeof_streamer_params(void) { return sizeof(wb_streamer_params); }
size_t wb_sizeof_stream_counters(void) { return sizeof(wb_stream_counters); }
size_t wb_sizeof_route_load(void) { return sizeof(wb_route_load); }
size_t wb_sizeof_cache_stats(void) { return sizeof(wb_cache_stats); }

}  // extern "C"
