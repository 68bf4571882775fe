// Expert streaming: route-time loading of the experts each token uses.
//
// Lifecycle: capture (one warm-up decode observes the graph and records the expert weight
// tensors and every named weight leaf) -> bind (Python supplies each expert tensor's file
// position, from the GGUF) -> activate (expert tensors' data is rebound onto memory we own) ->
// stream (the eval callback isolates each `ffn_moe_topk-<il>` node, reads the routed expert ids
// and makes exactly those slices resident before the expert matmuls run).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "reader.h"
#include "workbench_native.h"

struct ggml_tensor;

namespace wb {

struct Projection {
    ggml_tensor * tensor = nullptr;
    std::string name;
    uint64_t stride = 0;       // bytes of one expert (nb[2])
    int32_t file = -1;         // shard index
    uint64_t offset = 0;       // absolute file offset of the tensor's data
    uint8_t * region = nullptr;  // memory the tensor is rebound to
    uint8_t * reservation = nullptr;  // the mapping region lies in (LRU mode)
    void * original = nullptr;   // the mmap address llama.cpp gave it
};

struct Layer {
    std::vector<Projection> projs;
    int64_t n_expert = 0;
    uint64_t entry_bytes = 0;  // one expert across all projections
};

class Streamer {
public:
    Streamer(const std::vector<std::string> & paths, const wb_streamer_params & params);
    ~Streamer();

    bool eval(ggml_tensor * t, bool ask);

    void capture_begin();
    void capture_end();
    std::vector<std::string> captured_expert_names() const;
    void bind_expert(const std::string & name, int32_t file, uint64_t offset, uint64_t nbytes,
                     int64_t n_expert);
    void activate();
    uint64_t dense_anon(const std::string & name, int32_t file, uint64_t offset, uint64_t nbytes);
    void set_budget(int64_t bytes);
    double dense_resident_frac() const;
    void counters(wb_stream_counters * out) const;
    size_t take_trace(int32_t * buf, size_t cap);
    size_t layer_experts(int64_t * out, size_t cap) const;
    void expert_map(int32_t n_layer, int32_t n_expert, uint32_t * routed_out,
                    uint8_t * resident_out) const;
    void set_abort_flag(wb_abort_flag * flag) { abort_ = flag; }
    const std::string & fatal() const { return fatal_; }

private:
    enum class Mode { Idle, Capture, Stream };

    void capture_node(ggml_tensor * t);
    void load_layer(int il, const ggml_tensor * topk);
    void evict_until_under_budget();
    void evict(size_t entry);
    void lru_unlink(size_t entry);
    void lru_push_front(size_t entry);
    size_t entry_index(int il, int64_t e) const { return base_[static_cast<size_t>(il)] + static_cast<size_t>(e); }
    void fail(const std::string & message);

    Mode mode_ = Mode::Idle;
    wb_streamer_params params_;
    std::unique_ptr<FileSet> files_;
    std::vector<Layer> layers_;                       // by layer index; empty = not MoE
    std::unordered_map<std::string, ggml_tensor *> leaves_;  // named weight leaves seen in capture
    std::vector<uint8_t *> shared_slots_;             // cache off: one slot per projection index
    std::vector<size_t> shared_sizes_;

    // LRU over (layer, expert) entries; base_[il] is layer il's first entry index.
    std::vector<size_t> base_;
    std::vector<uint8_t> valid_, ever_evicted_;
    // Cumulative routed slots per entry (token x top-k, duplicates included), for the expert
    // activity map: one increment per routed slot, next to the loop that already reads the ids.
    std::vector<uint32_t> routed_;
    std::vector<uint64_t> stamp_;
    std::vector<int64_t> prev_, next_;
    int64_t head_ = -1, tail_ = -1;   // head = most recently used
    uint64_t generation_ = 0;
    uint64_t budget_ = 0;             // bytes; LRU mode only
    bool lru_ = false;

    std::vector<ReadJob> jobs_;
    std::vector<int64_t> ids_;
    std::vector<uint8_t> seen_;
    int last_il_ = -1;
    uint64_t pass_bytes_ = 0, pass_layer_max_ = 0;

    struct DenseCopy {
        ggml_tensor * tensor;
        void * original;
        void * buffer;
    };
    std::vector<DenseCopy> dense_;  // restored and freed at destruction

    wb_stream_counters c_{};
    bool trace_ = false;
    std::vector<int32_t> trace_buf_;
    wb_abort_flag * abort_ = nullptr;
    std::string fatal_;
};

}  // namespace wb
