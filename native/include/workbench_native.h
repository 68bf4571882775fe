// workbench_native: the workbench's native seam under llama.cpp.
//
// A flat C ABI loaded with ctypes (workbench/moe/native.py is the only loader). Conventions, after
// llama.h: opaque structs, every create has its free, functions returning int give 0 on success
// and -1 on failure with the reason in wb_last_error(); caller-owned string buffers get the full
// length back (or -1) and are always NUL-terminated.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(WB_BUILDING_LIBRARY)
#define WB_API __attribute__((visibility("default")))
#else
#define WB_API
#endif

// Bumped whenever an exported signature or struct changes; the Python binding refuses a mismatch.
#define WB_ABI_VERSION 1

struct llama_context;

WB_API int32_t wb_abi_version(void);

// The last error message set on this thread ("" when none).
WB_API const char * wb_last_error(void);

// ---- build identity --------------------------------------------------------------------------
// The llama-cpp-python release whose headers this library was compiled against, and the SHA-256
// of the libllama it was linked to. Copies into buf (NUL-terminated); returns the full length.
WB_API int32_t wb_build_llama_cpp_python_version(char * buf, size_t buf_size);
WB_API int32_t wb_build_libllama_sha256(char * buf, size_t buf_size);
// Path of the libllama the dynamic loader actually bound this library to (via dladdr).
WB_API int32_t wb_loaded_libllama_path(char * buf, size_t buf_size);
// sizeof() of llama.h structs as compiled here; the binding compares them with its ctypes mirror.
WB_API size_t wb_sizeof_llama_context_params(void);
WB_API size_t wb_sizeof_llama_model_params(void);
WB_API size_t wb_sizeof_llama_batch(void);

// ---- cancellation ----------------------------------------------------------------------------
// An atomic flag that llama.cpp polls after every graph node: cancelling never runs Python there.
struct wb_abort_flag;

WB_API struct wb_abort_flag * wb_abort_flag_new(void);
WB_API void wb_abort_flag_free(struct wb_abort_flag * flag);
WB_API void wb_abort_flag_set(struct wb_abort_flag * flag, int32_t value);  // any thread
WB_API int32_t wb_abort_flag_get(const struct wb_abort_flag * flag);
// How many times llama.cpp asked the flag (diagnostics: proves the native path is the one in use).
WB_API uint64_t wb_abort_flag_polls(const struct wb_abort_flag * flag);
// Installs the flag as ctx's abort callback. The flag must outlive the context's use of it.
WB_API int32_t wb_abort_install(struct llama_context * ctx, struct wb_abort_flag * flag);

#ifdef __cplusplus
}
#endif
