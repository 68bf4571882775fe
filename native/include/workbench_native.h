// workbench_native: the workbench's native seam under llama.cpp.
//
// A flat C ABI loaded with ctypes (workbench/backend/native.py is the only loader). Conventions, after
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
#define WB_ABI_VERSION 6

struct llama_context;
struct ggml_tensor;

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
// sizeof() of this header's structs as compiled here; the binding compares them with its mirror.
WB_API size_t wb_sizeof_streamer_params(void);
WB_API size_t wb_sizeof_stream_counters(void);
WB_API size_t wb_sizeof_route_load(void);
WB_API size_t wb_sizeof_cache_stats(void);

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
// A fatal error (e.g. a failed expert read) also aborts the decode; it stays set until cleared.
WB_API void wb_abort_flag_set_fatal(struct wb_abort_flag * flag, int32_t value);
WB_API int32_t wb_abort_flag_get_fatal(const struct wb_abort_flag * flag);

// ---- expert streaming ------------------------------------------------------------------------
// Serial streaming: the eval callback loads each layer's routed experts before they are used.
struct wb_streamer;

struct wb_streamer_params {
    int32_t io_lanes;            // parallel readers, 1..8
    int32_t o_direct;            // try O_DIRECT (verified at open; falls back to buffered)
    int64_t cache_budget_bytes;  // < 0: no cache (shared slots, every routed slice re-read)
    int32_t trace;               // record the routing of every load (tests, route traces)
    // Cache-aware dropping: a routed slot is skipped when it is not the row's top expert, a cache
    // miss, and weighted below drop_frac / top-k. 0 = off; needs the cache (budget >= 0).
    float drop_frac;
    int32_t drop_renorm;         // scale the survivors back to the row's total weight
    int32_t drop_prefill;        // also drop while reading the prompt (default: decode only)
    int32_t debug_flags;         // tests only: 1 = poison unloaded slices (0xFF), 2 = no repoint,
                                 // 4 = learn a terminal weight node that never appears,
                                 // 8 = the top slot may drop too (the pin's control)
    // Cache-aware substitution: before a load, each resident expert's score is raised by
    // substitute_margin x (max - min of the token's scores) and the top-k taken again. 0 = off;
    // needs the cache. Decode only unless substitute_prefill.
    float substitute_margin;
    int32_t substitute_prefill;
    // With trace: also record each routed token's full score row (n_expert floats, in the space
    // substitution reads them: log probabilities for a softmax router), before substitution.
    int32_t trace_scores;
};

// Monotonic counters (except the *_now and demand fields). Times in ns, sizes in bytes.
struct wb_stream_counters {
    uint64_t read_bytes;       // bytes transferred (aligned windows under O_DIRECT)
    uint64_t requested_bytes;  // bytes of the expert slices that missed
    uint64_t io_ns;            // wall time the eval thread waited for reads
    uint64_t mgmt_ns;          // lookup, LRU, eviction
    uint64_t loads;            // layer loads (one per topk node)
    uint64_t lookups;          // unique (layer, expert) lookups
    uint64_t hits;
    uint64_t routed;           // routed slots (token x top-k), duplicates included
    uint64_t evictions;
    uint64_t rereads;          // misses of entries that had been resident before
    uint64_t resident_now;     // bytes resident in the cache
    uint64_t budget_now;       // cache budget in force (0 without a cache)
    uint64_t token_demand;     // distinct expert bytes of the last full pass over the layers
    uint64_t layer_demand;     // widest layer of that pass
    uint64_t resizes;
    uint64_t experts_routed;   // routed slots while dropping is on (prefill included)
    uint64_t experts_dropped;  // of those, slots the policy dropped
    int32_t o_direct;          // O_DIRECT really in use
    int32_t lanes;
    // The weight mass dropped is decode_dropped_weight / decode_weight (one definition, shared
    // with the route replay): both count decode only, while dropping is on.
    double decode_dropped_weight;  // router weight of the slots dropped while decoding
    double decode_weight;          // router weight of every decode routing, examined or not
    // Substitution (while its margin is > 0): slots of the rows it examined (k per row), and the
    // experts it brought into a row's set in place of the router's (a reorder counts 0).
    uint64_t experts_reranked;
    uint64_t experts_substituted;
};

// The routing of one layer load (one topk node), as take_routes returns it. Its slots follow in
// the flat arrays, token-major (n_tokens x k), in router rank order.
struct wb_route_load {
    int32_t layer;
    int32_t phase;     // 0 prefill, 1 decode (as last set with wb_streamer_set_phase)
    int32_t n_tokens;
    int32_t k;         // effective top-k
    int32_t first_step;  // context position of the first token routed; -1 if unattributable
    int32_t n_scores;    // score values per token recorded for this load (n_expert, or 0)
};

WB_API struct wb_streamer * wb_streamer_new(const char * const * paths, int32_t n_paths,
                                            struct wb_streamer_params params);
WB_API void wb_streamer_free(struct wb_streamer * s);
// The callback to set as llama_context_params.cb_eval, with the streamer as user data.
WB_API bool wb_streamer_eval(struct ggml_tensor * t, bool ask, void * user_data);
WB_API int32_t wb_streamer_capture_begin(struct wb_streamer * s);
WB_API int32_t wb_streamer_capture_end(struct wb_streamer * s);
// Names of captured expert tensors, NUL-separated into buf; returns the full length or -1.
WB_API int32_t wb_streamer_captured_experts(struct wb_streamer * s, char * buf, size_t buf_size);
WB_API int32_t wb_streamer_bind_expert(struct wb_streamer * s, const char * name, int32_t file,
                                       uint64_t offset, uint64_t nbytes, int64_t n_expert);
WB_API int32_t wb_streamer_activate(struct wb_streamer * s);
// Reads one dense weight into anonymous memory, rebinds it and drops its mmap pages.
WB_API int32_t wb_streamer_dense_anon(struct wb_streamer * s, const char * name, int32_t file,
                                      uint64_t offset, uint64_t nbytes);
WB_API int32_t wb_streamer_set_budget(struct wb_streamer * s, int64_t bytes);
// What the next decodes are: 0 prefill (the prompt), 1 decode (generated tokens). Dropping is
// armed only for decodes unless drop_prefill; route records carry the phase.
WB_API void wb_streamer_set_phase(struct wb_streamer * s, int32_t phase);
// Context position of the first token of the next decode call (-1: unknown). Later compute
// batches advance it by their token count; route records carry it (first_step).
WB_API void wb_streamer_set_position(struct wb_streamer * s, int64_t position);
// Fraction (0..1) of the dense weights' pages resident in RAM (mincore), or -1 if unmeasurable.
WB_API double wb_streamer_dense_resident_frac(const struct wb_streamer * s);
WB_API void wb_streamer_counters(const struct wb_streamer * s, struct wb_stream_counters * out);
// Route records since the last take (needs trace): how many loads and slots are pending.
WB_API int32_t wb_streamer_routes_pending(const struct wb_streamer * s, uint64_t * n_loads,
                                          uint64_t * n_slots);
// Copies every pending record out and clears them. Per slot: expert id, final router weight (NaN
// where the weight node was not read), residency before the load (1 hit, 0 miss, -1 no cache)
// and whether the drop policy discarded it. Buffers must hold what routes_pending said.
WB_API int32_t wb_streamer_take_routes(struct wb_streamer * s, struct wb_route_load * loads,
                                       uint64_t max_loads, int32_t * experts, float * weights,
                                       int8_t * residency, uint8_t * dropped, uint64_t max_slots);
// Score rows recorded since the last take (needs trace and trace_scores): n_tokens x n_scores
// floats per load, in the order of the route records (NaN rows where the scores could not be
// read). take copies them out and clears them; out must hold what pending said.
WB_API int32_t wb_streamer_route_scores_pending(const struct wb_streamer * s, uint64_t * n);
WB_API int32_t wb_streamer_take_route_scores(struct wb_streamer * s, float * out, uint64_t max);
// The drop rule on one token row of k slots, exactly as the eval callback applies it (for tests):
// edits w and ids in place and marks dropped[j]. Returns the slots dropped; the row's dropped
// and total router weight (before renormalisation) go to the out-parameters. pin_top 0 is the
// pin's negative control.
WB_API int32_t wb_drop_row(int64_t k, float * w, int32_t * ids, const uint8_t * resident,
                           float frac, int32_t renorm, int32_t pin_top, uint8_t * dropped,
                           double * dropped_weight, double * total_weight);
// The substitution rule on one token row, exactly as the eval callback applies it (for tests):
// scores (n_expert floats, in the space the margin applies to), resident flags, the router's k
// ids (rewritten only when the set changes). Returns the experts substituted, or -1.
WB_API int32_t wb_substitute_row(int64_t n_expert, const float * scores, const uint8_t * resident,
                                 float margin, int64_t k, int32_t * ids);
// Per (layer, expert): how many times substitution brought that expert into a row's set
// (cumulative, since activation). Row-major [n_layer][n_expert]; returns 0 or -1.
WB_API int32_t wb_streamer_substituted_map(const struct wb_streamer * s, int32_t n_layer,
                                           int32_t n_expert, uint32_t * out);
// Experts of each layer the streamer manages, by layer index (0 = dense or not captured), into
// out[0..cap); returns the number of layers (the last MoE layer + 1), or -1.
WB_API int32_t wb_streamer_layer_experts(const struct wb_streamer * s, int64_t * out, int32_t cap);
// The expert activity map: row-major [n_layer][n_expert] snapshots of the cumulative routed slots
// (token x top-k since activation, prefill included) and of LRU residency (1 = the (layer,
// expert) slices are in the cache now; always 0 with the cache off, where slots are shared).
// Cells the streamer does not manage are 0. O(n_layer x n_expert) copies; returns 0 or -1.
WB_API int32_t wb_streamer_expert_map(const struct wb_streamer * s, int32_t n_layer,
                                      int32_t n_expert, uint32_t * routed_out,
                                      uint8_t * resident_out);
// ---- cache policies, warm start, prefetch (issue 24) ------------------------------------------
// Eviction policy (0 lru, 1 lfru: frequency + recency, 2 layer: layer-aware) and the token-cycle
// guard (while the budget is below the last pass's token demand, misses beyond the budget are
// transient and evicted first). Any time; the per-entry state is kept for every policy.
WB_API int32_t wb_streamer_set_cache_policy(struct wb_streamer * s, int32_t policy, int32_t guard);

// Prefetch (after activate; needs the cache): after each decode load, the experts the previous
// token routed at the next layer are read on a thread of their own while this layer computes;
// the next load waits for them first. Off unless turned on.
WB_API int32_t wb_streamer_set_prefetch(struct wb_streamer * s, int32_t on);

struct wb_cache_stats {
    uint64_t transient_admissions;  // misses the guard admitted as transient
    uint64_t preloaded_entries;     // warm start: entries read at open
    uint64_t preloaded_bytes;
    uint64_t preload_read_bytes;    // bytes transferred for them (not in read_bytes)
    uint64_t preload_ns;
    uint64_t preload_hits;          // preloaded entries whose first lookup hit
    uint64_t preload_unused;        // preloaded entries evicted before any lookup
    uint64_t prefetch_issued;       // entries read ahead for the next layer
    uint64_t prefetch_bytes;        // bytes transferred for them (not in read_bytes)
    uint64_t prefetch_hits;         // prefetched entries whose first lookup hit
    uint64_t prefetch_wasted_bytes; // prefetched entries evicted before any lookup
    uint64_t prefetch_wait_ns;      // eval thread waiting for a prefetch still in flight
    uint64_t prefetch_hit_bytes;    // bytes of the prefetch hits (reads the decode did not wait for)
    uint64_t prefetch_read_ns;      // wall time the prefetch reads took, on their own thread
    int32_t policy;
    int32_t guard;
    int32_t guard_active;           // the guard was in force at the last load
    int32_t prefetch;               // prefetch on
};

// Waits for a prefetch still in flight first (its bytes are then counted).
WB_API int32_t wb_streamer_cache_stats(struct wb_streamer * s, struct wb_cache_stats * out);
// Warm start: reads the entries (layers[i], experts[i]) in order while they fit in the budget
// (after activate, before the first decode). Returns the count read, or -1.
WB_API int32_t wb_streamer_preload(struct wb_streamer * s, const int32_t * layers,
                                   const int32_t * experts, uint64_t n);
// Per (layer, expert): 0 absent, 1 resident, 2 transient (guard), 3 preloaded or prefetched and
// not yet looked up. Row-major [n_layer][n_expert]; returns 0 or -1.
WB_API int32_t wb_streamer_entry_states(const struct wb_streamer * s, int32_t n_layer,
                                        int32_t n_expert, uint8_t * out);

WB_API void wb_streamer_set_abort_flag(struct wb_streamer * s, struct wb_abort_flag * flag);
// The streaming failure that aborted a decode ("" when none); returns the full length.
WB_API int32_t wb_streamer_fatal(const struct wb_streamer * s, char * buf, size_t buf_size);

// ---- lean streamed load ----------------------------------------------------------------------
// llama.cpp maps a model with MAP_POPULATE and advises WILLNEED over the whole file. Between begin
// and end, on the calling thread only, libllama's GOT entries for mmap/mmap64/posix_madvise lead
// to wrappers. For a read-only mapping at offset 0 of one of `paths` they drop MAP_POPULATE, map
// anonymous zero pages over the `blank` ranges (page-aligned inward) and narrow WILLNEED to the
// rest; every other call passes through unchanged. Only for a streamed load: before any real
// decode every blanked tensor must be rebound (streamer, dense anon) or restored. end restores
// the GOT entries (once the last armed thread ends). begin fails (-1, reason in wb_last_error)
// if libllama's imports cannot be found or written; the load then runs the normal way.
struct wb_lean_range {
    int32_t file;     // index into paths
    uint64_t offset;  // bytes into that file
    uint64_t nbytes;
};

struct wb_lean_load_stats {
    uint64_t populate_stripped;       // model mmaps whose MAP_POPULATE was dropped
    uint64_t file_maps;               // model mmaps made while armed
    uint64_t file_map_bytes;
    uint64_t blanked_bytes;           // bytes given zero pages instead of file pages
    uint64_t blank_failures;          // ranges left file-backed (correct, just read on touch)
    uint64_t willneed_narrowed;       // WILLNEED calls on model mappings narrowed
    uint64_t willneed_bytes;          // bytes still advised WILLNEED
    uint64_t willneed_skipped_bytes;  // blanked bytes left out of it
};

WB_API int32_t wb_lean_load_begin(const char * const * paths, int32_t n_paths,
                                  const struct wb_lean_range * blank, uint64_t n_blank);
// Also gives each shard's mapping address (0: not mapped while armed) in bases[0..n_bases).
WB_API int32_t wb_lean_load_end(struct wb_lean_load_stats * out, uint64_t * bases, int32_t n_bases);
// Maps the file pages of [offset, offset + nbytes) of `path` back over a blanked range of its
// mapping at `base` (for a tensor the graph did not capture). Returns the bytes restored, or -1.
WB_API int64_t wb_lean_load_restore(const char * path, uint64_t base, uint64_t offset,
                                    uint64_t nbytes);
// GOT entries currently pointing at the wrappers (0 when no load is armed).
WB_API int32_t wb_lean_load_patched(void);

// ---- yardstick -------------------------------------------------------------------------------
// O_DIRECT preads of the given byte ranges (each widened to 4 KiB boundaries) on `lanes` threads
// pulling from one counter; reports bytes and wall ns. Independent of the streamer's reader.
WB_API int32_t wb_iobench(const char * path, const uint64_t * offsets, const uint64_t * sizes,
                          uint64_t n, int32_t lanes, uint64_t * bytes_out, uint64_t * ns_out);

#ifdef __cplusplus
}
#endif
