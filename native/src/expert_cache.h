// The expert cache: where streamed expert slices live, which are resident, and what to evict.
//
// With a budget (LRU mode) every (layer, projection) gets an address range as large as the whole
// tensor, committed lazily, and an entry is one (layer, expert) across its projections. Without
// one (budget < 0) every layer shares one slot per projection and each load re-reads its slices.
// Also kept here: the activity map (routings per entry) and the demand meters.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cache_policy.h"
#include "prefetcher.h"
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

class ExpertCache {
public:
    ExpertCache() = default;
    ~ExpertCache();
    ExpertCache(const ExpertCache &) = delete;
    ExpertCache & operator=(const ExpertCache &) = delete;

    // ---- capture and bind -------------------------------------------------------------------
    void add_projection(int il, ggml_tensor * tensor);
    std::vector<std::string> names() const;
    void bind(const std::string & name, int32_t file, uint64_t offset, uint64_t nbytes,
              int64_t n_expert);

    // Rebinds every expert tensor onto our memory. budget < 0: no cache (shared slots). With
    // `poison`, every slice not resident is filled with 0xFF bytes (NaN in every float and
    // quantised block scale), so any read of an unloaded expert shows in the logits (tests).
    void activate(int64_t budget_bytes, bool poison, wb_stream_counters & c);
    bool active() const { return active_; }

    // The layer's experts, or nullptr if the streamer does not manage layer il.
    const Layer * layer(int il) const {
        if (il < 0 || static_cast<size_t>(il) >= layers_.size()) return nullptr;
        const Layer & l = layers_[static_cast<size_t>(il)];
        return l.n_expert > 0 ? &l : nullptr;
    }
    bool lru() const { return lru_; }
    // In the cache now (always false without one: shared slots keep nothing between loads).
    bool resident(int il, int64_t e) const { return lru_ && valid_[entry_index(il, e)] != 0; }
    // One routed slot, for the activity map.
    void note_routed(int il, int64_t e) { ++routed_[entry_index(il, e)]; }

    // Makes layer il's distinct experts `ids` resident (reads what misses), then evicts down to
    // the budget, never what this load just used. Counts into c.
    void load(int il, const std::vector<int64_t> & ids, FileSet & files, wb_stream_counters & c);
    void set_budget(int64_t bytes, wb_stream_counters & c);

    // ---- policies, warm start (cache_policy.h) ------------------------------------------------
    void set_policy(CachePolicy policy, bool guard) { policy_ = policy; guard_ = guard; }
    // Reads entries (layer, expert) in the given order while they fit in the budget; not
    // lookups. Returns how many were read.
    size_t preload(const int32_t * layers, const int32_t * experts, size_t n, FileSet & files,
                   wb_stream_counters & c);
    // Waits for a prefetch in flight first (outside any decode: not counted as a wait), so that
    // its bytes are in.
    void cache_stats(wb_cache_stats * out);
    // Prefetch (prefetcher.h): after each decode load, the experts the previous token routed at
    // the next layer are read on the prefetch thread while this layer computes.
    void enable_prefetch(const std::vector<std::string> & paths, int lanes, bool direct);
    void set_decode(bool decode) { decode_ = decode; }
    // Waits for a prefetch in flight (none: returns at once); the wait is the eval thread's.
    void settle(wb_stream_counters & c);
    // Per entry: 0 not resident, 1 resident, 2 resident and transient (the guard's), 3 preloaded
    // and not yet looked up. Row-major [n_layer][n_expert] like expert_map.
    void entry_states(int32_t n_layer, int32_t n_expert, uint8_t * out) const;

    size_t layer_experts(int64_t * out, size_t cap) const;
    void expert_map(int32_t n_layer, int32_t n_expert, uint32_t * routed_out,
                    uint8_t * resident_out) const;

private:
    size_t entry_index(int il, int64_t e) const {
        return base_[static_cast<size_t>(il)] + static_cast<size_t>(e);
    }
    void evict_until_under_budget(wb_stream_counters & c);
    void evict_by_policy(wb_stream_counters & c);
    int layer_of(size_t entry) const;
    void evict(size_t entry, wb_stream_counters & c);
    void lru_unlink(size_t entry);
    void lru_push_front(size_t entry);

    std::vector<Layer> layers_;           // by layer index; empty = not MoE
    std::vector<uint8_t *> shared_slots_;  // cache off: one slot per projection index
    std::vector<size_t> shared_sizes_;
    bool active_ = false;
    bool poison_ = false;

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

    // Policy state per entry (all policies keep it, so a policy can change between turns).
    CachePolicy policy_ = CachePolicy::Lru;
    bool guard_ = false;
    std::vector<double> crf_;
    std::vector<uint64_t> tick_;
    std::vector<uint8_t> transient_, preloaded_;
    uint64_t tick_now_ = 0;
    wb_cache_stats stats_{};
    std::vector<std::pair<EvictionKey, size_t>> candidates_;
    void issue_prefetch(int il, const std::vector<int64_t> & ids, wb_stream_counters & c);
    std::unique_ptr<Prefetcher> prefetcher_;
    bool decode_ = false;
    std::vector<std::vector<int64_t>> last_ids_;  // the last decode load's experts per layer
    std::vector<uint8_t> ahead_;                  // prefetched, not yet looked up

    std::vector<ReadJob> jobs_;
    int last_il_ = -1;
    uint64_t pass_bytes_ = 0, pass_layer_max_ = 0;
};

}  // namespace wb
