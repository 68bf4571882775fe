// Expert streaming: route-time loading of the experts each token uses.
//
// Lifecycle: capture (one warm-up decode observes the graph and records the expert weight
// tensors and every named weight leaf) -> bind (Python supplies each expert tensor's file
// position, from the GGUF) -> activate (expert tensors' data is rebound onto memory we own) ->
// stream (the eval callback isolates each `ffn_moe_topk-<il>` node, reads the routed expert ids
// and makes exactly those slices resident before the expert matmuls run).
//
// The parts, one job each: graph_hook.cpp (the eval callback: capture, ask/eval, the drop
// decision point and route recording), expert_cache.cpp (LRU, budget, residency, eviction,
// activity map), reader.cpp (lanes, O_DIRECT), dense.cpp (dense weights), drop_policy.cpp (the
// per-row drop rule), node_names.cpp (graph and tensor names). This file's class ties them up.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "dense.h"
#include "expert_cache.h"
#include "reader.h"
#include "workbench_native.h"

struct ggml_tensor;

namespace wb {

// Test-only switches (wb_streamer_params.debug_flags).
constexpr int32_t kDebugPoison = 1;       // unloaded expert slices hold 0xFF (NaN): a read shows
constexpr int32_t kDebugNoRepoint = 2;    // dropped slots keep their id (the guard's control)
constexpr int32_t kDebugLostTerminal = 4; // learn a terminal no graph has (the late-load path)
constexpr int32_t kDebugNoPin = 8;         // the top slot may drop too (the pin's negative control)

class Streamer {
public:
    Streamer(const std::vector<std::string> & paths, const wb_streamer_params & params);
    ~Streamer() = default;

    bool eval(ggml_tensor * t, bool ask);

    void capture_begin();
    void capture_end();
    std::vector<std::string> captured_expert_names() const { return cache_.names(); }
    void bind_expert(const std::string & name, int32_t file, uint64_t offset, uint64_t nbytes,
                     int64_t n_expert) { cache_.bind(name, file, offset, nbytes, n_expert); }
    void activate();
    uint64_t dense_anon(const std::string & name, int32_t file, uint64_t offset, uint64_t nbytes) {
        return dense_.read_anon(name, file, offset, nbytes, *files_);
    }
    void set_budget(int64_t bytes) { cache_.set_budget(bytes, c_); }
    void set_phase(int32_t phase) {
        phase_ = phase;
        cache_.set_decode(phase == 1);  // prefetch reads ahead in decode only
    }
    void set_prefetch(bool on) {
        if (on) cache_.enable_prefetch(paths_, params_.io_lanes, params_.o_direct != 0);
    }
    void set_position(int64_t position) {
        next_position_ = position;
        last_topk_il_ = kNoLayer;  // the next topk node starts a compute batch
    }
    double dense_resident_frac() const { return dense_.resident_frac(); }
    void counters(wb_stream_counters * out) const { *out = c_; }
    void routes_pending(uint64_t * n_loads, uint64_t * n_slots) const;
    void take_routes(wb_route_load * loads, uint64_t max_loads, int32_t * experts, float * weights,
                     int8_t * residency, uint8_t * dropped, uint64_t max_slots);
    uint64_t route_scores_pending() const { return route_scores_.size(); }
    void take_route_scores(float * out, uint64_t max);
    size_t layer_experts(int64_t * out, size_t cap) const { return cache_.layer_experts(out, cap); }
    void expert_map(int32_t n_layer, int32_t n_expert, uint32_t * routed_out,
                    uint8_t * resident_out) const {
        cache_.expert_map(n_layer, n_expert, routed_out, resident_out);
    }
    void substituted_map(int32_t n_layer, int32_t n_expert, uint32_t * out) const;
    void set_cache_policy(int32_t policy, int32_t guard) {
        cache_.set_policy(cache_policy_from(policy), guard != 0);
    }
    void cache_stats(wb_cache_stats * out) { cache_.cache_stats(out); }
    size_t preload(const int32_t * layers, const int32_t * experts, size_t n) {
        if (mode_ != Mode::Stream) throw std::runtime_error("preload needs an active streamer");
        return cache_.preload(layers, experts, n, *files_, c_);
    }
    void entry_states(int32_t n_layer, int32_t n_expert, uint8_t * out) const {
        cache_.entry_states(n_layer, n_expert, out);
    }
    void set_abort_flag(wb_abort_flag * flag) { abort_ = flag; }
    const std::string & fatal() const { return fatal_; }

private:
    enum class Mode { Idle, Capture, Stream };

    // graph_hook.cpp
    void capture_node(ggml_tensor * t);
    void on_topk(int il, ggml_tensor * topk);
    void on_weights(int il, int variant, const ggml_tensor * w);
    void close_pending();
    void late_load();
    void decide(const ggml_tensor * w, int64_t slot_stride, int64_t token_stride);
    void load_now(int il);
    bool drop_armed() const;
    bool substitute_armed() const;
    void substitute(int il, ggml_tensor * topk, int64_t k, int64_t n_tokens);
    // One token's scores into score_row_ (log space for a softmax); false when unreadable.
    bool score_row(const ggml_tensor * topk, int64_t n_expert, int64_t n_tokens, int64_t tok);
    void fail(const std::string & message);

    Mode mode_ = Mode::Idle;
    wb_streamer_params params_;
    std::vector<std::string> paths_;
    std::unique_ptr<FileSet> files_;
    ExpertCache cache_;
    DenseWeights dense_;
    int32_t phase_ = 0;  // 0 prefill, 1 decode (wb_streamer_set_phase)
    // Positions for route records: a compute batch (ubatch) starts where the layer index stops
    // increasing; its first MoE layer routes all its tokens.
    static constexpr int kNoLayer = 1 << 30;
    int64_t next_position_ = -1;   // first position of the next compute batch, -1 unknown
    int64_t batch_first_ = -1;     // of the current one
    int64_t batch_tokens_ = 0;
    int last_topk_il_ = kNoLayer;
    int32_t first_step(int il, int64_t n_tokens);

    // The layer whose routing was read at its topk node and is still open: its weights are read
    // at the weight nodes, and (drop armed, terminal known) its load waits for the terminal one.
    struct Pending {
        int il = -1;
        bool deferred = false;
        int last_variant = -1;     // the last weight variant seen for this layer (learning)
        ggml_tensor * topk = nullptr;
        int64_t k = 0, n_tokens = 0;
        int64_t route = -1;        // index of this load's route record, -1 when not recording
        size_t route_slot0 = 0;    // its first slot in the route_* arrays
        double weight_counted = 0.0;  // decode weight already added for this load (see on_weights)
    };
    Pending pending_;
    std::vector<int8_t> terminal_;  // learned terminal weight variant per layer, -1 unknown
    std::vector<int32_t> ids_flat_;     // this layer's routing, token-major (n_tokens x k)
    std::vector<uint8_t> resident_flat_;  // residency of each slot before the load
    std::vector<float> row_w_;
    std::vector<uint8_t> row_dropped_;
    std::vector<int64_t> ids_;          // distinct experts to load
    // Substitution's scratch: the layer's residency (queried once per load), one row's scores in
    // the margin's space, the sort order; and per layer, how often each expert was brought in.
    std::vector<uint8_t> layer_resident_;
    std::vector<float> score_row_;
    std::vector<int32_t> order_;
    std::vector<int32_t> router_row_;  // a row's ids as the router chose them
    std::vector<std::vector<uint32_t>> substituted_in_;
    std::vector<uint8_t> seen_;

    wb_stream_counters c_{};
    bool trace_ = false;
    std::vector<wb_route_load> route_loads_;
    std::vector<int32_t> route_experts_;
    std::vector<float> route_weights_;
    std::vector<int8_t> route_residency_;
    std::vector<uint8_t> route_dropped_;
    bool trace_scores_ = false;
    std::vector<float> route_scores_;  // score rows (trace_scores), see wb_route_load.n_scores
    wb_abort_flag * abort_ = nullptr;
    std::string fatal_;
};

}  // namespace wb
