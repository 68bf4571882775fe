// Eviction policies of the expert cache, beyond its historical LRU (issue 24).
//
// The cache keeps, per (layer, expert) entry, a recency tick (the global lookup count at its
// last lookup) and a score (`crf`: +1 per lookup, times kDecay at each closed pass over the
// layers). After a load it evicts, in ascending order of the policy's key, until the cache is
// within its budget, never an entry the load just looked up. workbench/moe/cache_policies.py
// replays the very same rules from a route trace (the independent count the tests compare with),
// in IEEE double and the same order of operations.
//
// The token-cycle guard: while the budget is below the last pass's token demand, a miss brought
// in beyond the budget is transient and goes before every other entry, and a load's own transient
// entries do not count against the budget (they leave at the next load), so a pinned subset
// stays instead of the whole cache cycling through (where LRU hits 0 %).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace wb {

enum class CachePolicy : int32_t {
    Lru = 0,    // the last tick
    Lfru = 1,   // frequency + recency: the decayed lookup count, then the tick
    Layer = 2,  // layer-aware: the score over the layers until the entry's layer comes round
};

// Per closed pass (a token): a half-life of ~34 tokens (moe/cache_policies.py says why 0.98).
constexpr double kDecay = 0.98;

inline CachePolicy cache_policy_from(int32_t value) {
    if (value < 0 || value > 2) {
        throw std::invalid_argument("unknown cache policy " + std::to_string(value) +
                                    " (0 lru, 1 lfru, 2 layer)");
    }
    return static_cast<CachePolicy>(value);
}

struct EvictionKey {
    int32_t klass;   // 0 transient (guard), 1 everything else
    double score;
    uint64_t tick;
    bool operator<(const EvictionKey & o) const {
        if (klass != o.klass) return klass < o.klass;
        if (score != o.score) return score < o.score;
        return tick < o.tick;
    }
};

// The key of one entry of layer `layer` after a load of layer `layer_now`, in a cycle of
// `n_layers` layer indices.
inline EvictionKey eviction_key(CachePolicy policy, bool transient, double crf, uint64_t tick,
                                int layer, int layer_now, int n_layers) {
    double score = 0.0;
    if (policy == CachePolicy::Lfru) {
        score = crf;
    } else if (policy == CachePolicy::Layer) {
        int staleness = ((layer - layer_now) % n_layers + n_layers) % n_layers;
        if (staleness == 0) staleness = n_layers;
        score = crf / static_cast<double>(staleness);
    }
    return EvictionKey{transient ? 0 : 1, score, tick};
}

}  // namespace wb
