// The eval callback: which graph nodes are isolated, and what happens at each.
//
// Stream phase: every `ffn_moe_topk-<il>` node is isolated; its callback reads the routed ids
// (an I32 view of the argsort: gathered with its nb[0]/nb[1] strides, the row stride being
// n_expert * 4) and loads the layer. When the router's final weights are wanted (dropping armed
// for this phase, or route recording on) the weight-chain nodes of the layer are isolated too.
// Dropping needs the FINAL weights, so with the policy armed the load waits for the terminal node
// of the layer's chain, learned from the graph: on a layer's first graph every variant is
// isolated and the last one seen becomes its terminal. Until then the layer loads at its topk
// node, undropped. With dropping on, the terminal is learned on the first graph the session runs
// (the first prompt), whether or not routes are recorded and whether or not dropping is armed in
// prefill: so every generated token may drop, the first of a turn included, and recording routes
// never changes what is dropped. A learned terminal that fails to appear is caught at the layer's first expert
// matmul, asked before it runs: the layer loads there, undropped, and the terminal is forgotten.
//
// Substitution (substitute_margin > 0, with the cache) runs at the topk node, before anything
// else sees the routing: the scores are the tensor the argsort sorted (the topk node is a view of
// the argsort, whose source that is; never the gate input, whose buffer a softmax computed in
// place may already have overwritten), read in log space when that tensor is a softmax's output.
// A row whose set changes gets its new ids written into the topk tensor, so the weights the graph
// gathers next are the router's own for the experts that run, and the drop rule, the route record
// and the load all see the routing that will execute.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "drop_policy.h"
#include "ggml.h"
#include "node_names.h"
#include "pages.h"
#include "streamer.h"
#include "substitute_policy.h"

namespace wb {

void Streamer::capture_node(ggml_tensor * t) {
    for (int i = 0; i < GGML_MAX_SRC; ++i) {
        ggml_tensor * src = t->src[i];
        if (src == nullptr || src->name[0] == '\0' || src->op != GGML_OP_NONE) continue;
        dense_.remember(src);
        int kind = -1;
        const int il = expert_layer(src->name, &kind);
        if (il < 0 || src->ne[2] <= 0) continue;
        cache_.add_projection(il, src);
    }
}

bool Streamer::drop_armed() const {
    return params_.drop_frac > 0.0f && cache_.lru() && (phase_ == 1 || params_.drop_prefill != 0);
}

bool Streamer::substitute_armed() const {
    return params_.substitute_margin > 0.0f && cache_.lru() &&
           (phase_ == 1 || params_.substitute_prefill != 0);
}

namespace {

// The tensor the topk node's argsort sorted, or null when the routing is not an argsort of scores
// (a token-id table's lookup) or not laid out as [n_expert, >= n_tokens] F32 rows.
const ggml_tensor * sorted_scores(const ggml_tensor * topk, int64_t n_expert, int64_t n_tokens) {
    const ggml_tensor * sort = topk->view_src != nullptr ? topk->view_src : topk->src[0];
    if (sort == nullptr || sort->op != GGML_OP_ARGSORT) return nullptr;
    const ggml_tensor * scores = sort->src[0];
    if (scores == nullptr || scores->type != GGML_TYPE_F32 || scores->ne[0] != n_expert ||
        scores->ne[1] < n_tokens || scores->data == nullptr) {
        return nullptr;
    }
    return scores;
}

bool is_softmax(const ggml_tensor * t) {
    while (t->view_src != nullptr) t = t->view_src;
    return t->op == GGML_OP_SOFT_MAX;
}

}  // namespace

bool Streamer::score_row(const ggml_tensor * topk, int64_t n_expert, int64_t n_tokens, int64_t tok) {
    const ggml_tensor * scores = sorted_scores(topk, n_expert, n_tokens);
    if (scores == nullptr) return false;
    const bool log_space = is_softmax(scores);
    score_row_.resize(static_cast<size_t>(n_expert));
    const auto * sbase = static_cast<const uint8_t *>(scores->data);
    for (int64_t e = 0; e < n_expert; ++e) {
        const float v = *reinterpret_cast<const float *>(sbase + e * scores->nb[0] + tok * scores->nb[1]);
        score_row_[static_cast<size_t>(e)] = log_space ? std::log(v) : v;
    }
    return true;
}

void Streamer::substitute(int il, ggml_tensor * topk, int64_t k, int64_t n_tokens) {
    const Layer & layer = *cache_.layer(il);
    const int64_t n_expert = layer.n_expert;
    if (sorted_scores(topk, n_expert, n_tokens) == nullptr) return;
    layer_resident_.resize(static_cast<size_t>(n_expert));
    for (int64_t e = 0; e < n_expert; ++e) {
        layer_resident_[static_cast<size_t>(e)] = cache_.resident(il, e) ? 1 : 0;
    }
    if (substituted_in_.size() <= static_cast<size_t>(il)) substituted_in_.resize(static_cast<size_t>(il) + 1);
    auto & brought = substituted_in_[static_cast<size_t>(il)];
    brought.resize(static_cast<size_t>(n_expert), 0);
    auto * ibase = static_cast<uint8_t *>(topk->data);
    for (int64_t tok = 0; tok < n_tokens; ++tok) {
        score_row(topk, n_expert, n_tokens, tok);
        int32_t * ids = ids_flat_.data() + tok * k;
        router_row_.assign(ids, ids + k);
        const SubstituteRowResult r = substitute_row(n_expert, score_row_.data(), sizeof(float),
                                                     layer_resident_.data(),
                                                     params_.substitute_margin, k, ids, order_);
        c_.experts_reranked += static_cast<uint64_t>(k);
        if (r.substituted == 0) continue;
        c_.experts_substituted += static_cast<uint64_t>(r.substituted);
        for (int64_t j = 0; j < k; ++j) {
            *reinterpret_cast<int32_t *>(ibase + j * topk->nb[0] + tok * topk->nb[1]) = ids[j];
            if (std::find(router_row_.begin(), router_row_.end(), ids[j]) == router_row_.end()) {
                ++brought[static_cast<size_t>(ids[j])];
            }
        }
    }
}

void Streamer::substituted_map(int32_t n_layer, int32_t n_expert, uint32_t * out) const {
    std::fill(out, out + static_cast<size_t>(n_layer) * static_cast<size_t>(n_expert), 0u);
    for (size_t il = 0; il < substituted_in_.size() && il < static_cast<size_t>(n_layer); ++il) {
        const auto & row = substituted_in_[il];
        for (size_t e = 0; e < row.size() && e < static_cast<size_t>(n_expert); ++e) {
            out[il * static_cast<size_t>(n_expert) + e] = row[e];
        }
    }
}

bool Streamer::eval(ggml_tensor * t, bool ask) {
    if (mode_ == Mode::Capture) {
        if (ask) capture_node(t);
        return false;  // observe only: never isolate a node during capture
    }
    if (mode_ != Mode::Stream) return ask ? false : true;
    // The prefix test keeps every other node off this path: one memcmp per node.
    if (std::memcmp(t->name, "ffn_moe_", 8) != 0) return ask ? false : true;
    if (!fatal_.empty()) return ask ? false : true;
    try {
        const int il = topk_layer(t->name);
        if (il >= 0) {
            if (ask) return true;
            // A MoE layer whose experts were not captured stays resident.
            if (cache_.layer(il) != nullptr) on_topk(il, t);
            return true;
        }
        if (pending_.il < 0) return ask ? false : true;
        int variant = -1;
        const int wl = weights_layer(t->name, &variant);
        if (wl >= 0) {
            if (wl != pending_.il) return ask ? false : true;
            const int8_t term = terminal_[static_cast<size_t>(wl)];
            if (ask) return term < 0 || term == variant;
            on_weights(wl, variant, t);
            return true;
        }
        // Past the weight chain without meeting the learned terminal: load before the first
        // expert matmul of the layer runs (this ask comes before it is computed).
        if (ask && pending_.deferred && t->op == GGML_OP_MUL_MAT_ID) late_load();
    } catch (const std::exception & e) {
        fail(e.what());
    }
    return ask ? false : true;
}

int32_t Streamer::first_step(int il, int64_t n_tokens) {
    if (il <= last_topk_il_) {  // a new compute batch
        batch_first_ = next_position_;
        batch_tokens_ = n_tokens;
        if (next_position_ >= 0) next_position_ += n_tokens;
    }
    last_topk_il_ = il;
    if (batch_first_ < 0 || n_tokens == 0 || n_tokens > batch_tokens_) return -1;
    // A layer routing fewer rows than the batch has (the last one, where llama.cpp keeps only
    // the rows whose logits are read) routes the batch's final positions.
    return static_cast<int32_t>(batch_first_ + batch_tokens_ - n_tokens);
}

void Streamer::on_topk(int il, ggml_tensor * topk) {
    close_pending();
    const uint64_t t0 = now_ns();
    const Layer & layer = *cache_.layer(il);
    const int64_t k = topk->ne[0];
    const int64_t n_tokens = topk->ne[1];
    const bool armed = drop_armed();
    if (terminal_.size() <= static_cast<size_t>(il)) terminal_.resize(static_cast<size_t>(il) + 1, -1);
    // Learning the terminal needs the weight nodes, armed or not (see the top of this file).
    const bool learn = params_.drop_frac > 0.0f && cache_.lru() && terminal_[static_cast<size_t>(il)] < 0;
    const bool want_weights = armed || trace_ || learn;
    ids_flat_.resize(static_cast<size_t>(k * n_tokens));
    resident_flat_.resize(ids_flat_.size());
    const auto * base = static_cast<const uint8_t *>(topk->data);
    for (int64_t tok = 0; tok < n_tokens; ++tok) {
        for (int64_t j = 0; j < k; ++j) {
            const int32_t e = *reinterpret_cast<const int32_t *>(base + j * topk->nb[0] + tok * topk->nb[1]);
            if (e < 0 || e >= layer.n_expert) throw std::runtime_error("router chose an expert out of range");
            ids_flat_[static_cast<size_t>(tok * k + j)] = e;
        }
    }
    int32_t n_scores = 0;
    if (trace_scores_) {  // the router's own scores, before substitution changes anything
        n_scores = static_cast<int32_t>(layer.n_expert);
        for (int64_t tok = 0; tok < n_tokens; ++tok) {
            if (score_row(topk, layer.n_expert, n_tokens, tok)) {
                route_scores_.insert(route_scores_.end(), score_row_.begin(), score_row_.end());
            } else {
                route_scores_.insert(route_scores_.end(), static_cast<size_t>(layer.n_expert),
                                     std::numeric_limits<float>::quiet_NaN());
            }
        }
    }
    if (substitute_armed()) substitute(il, topk, k, n_tokens);
    for (size_t slot = 0; slot < ids_flat_.size(); ++slot) {
        const int32_t e = ids_flat_[slot];
        // Residency before the load: what the drop rule and the route record see.
        resident_flat_[slot] = want_weights && cache_.resident(il, e) ? 1 : 0;
        ++c_.routed;
        cache_.note_routed(il, e);
    }
    if (params_.drop_frac > 0.0f) c_.experts_routed += static_cast<uint64_t>(k * n_tokens);
    pending_ = Pending{};
    const int32_t step = first_step(il, n_tokens);
    if (trace_) {
        pending_.route = static_cast<int64_t>(route_loads_.size());
        pending_.route_slot0 = route_experts_.size();
        route_loads_.push_back({il, phase_, static_cast<int32_t>(n_tokens), static_cast<int32_t>(k), step,
                                n_scores});
        route_experts_.insert(route_experts_.end(), ids_flat_.begin(), ids_flat_.end());
        route_weights_.insert(route_weights_.end(), ids_flat_.size(),
                              std::numeric_limits<float>::quiet_NaN());
        for (uint8_t r : resident_flat_) {
            route_residency_.push_back(cache_.lru() ? static_cast<int8_t>(r) : int8_t{-1});
        }
        route_dropped_.insert(route_dropped_.end(), ids_flat_.size(), 0);
    }
    c_.mgmt_ns += now_ns() - t0;
    if (want_weights) {
        pending_.il = il;
        pending_.topk = topk;
        pending_.k = k;
        pending_.n_tokens = n_tokens;
    }
    if (armed && terminal_[static_cast<size_t>(il)] >= 0) {
        pending_.deferred = true;  // the terminal weight node decides, then loads
        return;
    }
    load_now(il);
}

namespace {

// Where a weight node keeps slot j of token t: [1, k, n_tokens] (slot nb[1], token nb[2]) except
// the norm variant's 2-D [k, n_tokens]. False for any other shape or type (then nothing is read).
bool weight_strides(const ggml_tensor * w, int64_t k, int64_t n_tokens, int64_t * ss, int64_t * ts) {
    if (w->type != GGML_TYPE_F32) return false;
    if (w->ne[0] == 1 && w->ne[1] == k && w->ne[2] == n_tokens) {
        *ss = static_cast<int64_t>(w->nb[1]);
        *ts = static_cast<int64_t>(w->nb[2]);
        return true;
    }
    if (w->ne[0] == k && w->ne[1] == n_tokens && w->ne[2] == 1) {
        *ss = static_cast<int64_t>(w->nb[0]);
        *ts = static_cast<int64_t>(w->nb[1]);
        return true;
    }
    return false;
}

}  // namespace

void Streamer::on_weights(int il, int variant, const ggml_tensor * w) {
    pending_.last_variant = variant;
    int64_t ss = 0, ts = 0;
    const bool readable = weight_strides(w, pending_.k, pending_.n_tokens, &ss, &ts);
    if (readable && phase_ == 1 && params_.drop_frac > 0.0f) {
        // The router's total decode weight, the denominator of the weight mass dropped: every
        // decode row counts, examined by the rule or not. The last variant seen is the final
        // weight (the learning rule), so a later variant replaces an earlier one's sum.
        const auto * base = static_cast<const uint8_t *>(w->data);
        double sum = 0.0;
        for (int64_t tok = 0; tok < pending_.n_tokens; ++tok) {
            for (int64_t j = 0; j < pending_.k; ++j) {
                sum += *reinterpret_cast<const float *>(base + tok * ts + j * ss);
            }
        }
        c_.decode_weight += sum - pending_.weight_counted;
        pending_.weight_counted = sum;
    }
    if (pending_.route >= 0 && readable) {
        // The weights as the router produced them (the last variant seen wins): the record keeps
        // them even where the policy then drops a slot.
        const auto * base = static_cast<const uint8_t *>(w->data);
        float * out = route_weights_.data() + pending_.route_slot0;
        for (int64_t tok = 0; tok < pending_.n_tokens; ++tok) {
            for (int64_t j = 0; j < pending_.k; ++j) {
                out[tok * pending_.k + j] = *reinterpret_cast<const float *>(base + tok * ts + j * ss);
            }
        }
    }
    if (!pending_.deferred || terminal_[static_cast<size_t>(il)] != variant) return;
    pending_.deferred = false;
    if (readable) {
        decide(w, ss, ts);
    }
    load_now(il);  // unreadable shape: undropped rather than guessed
}

void Streamer::close_pending() {
    if (pending_.il < 0) return;
    if (pending_.deferred) {
        late_load();  // only reached when no expert matmul of the layer was seen either
    } else if (pending_.last_variant >= 0 && terminal_[static_cast<size_t>(pending_.il)] < 0) {
        const bool lost = (params_.debug_flags & kDebugLostTerminal) != 0;
        terminal_[static_cast<size_t>(pending_.il)] =
            static_cast<int8_t>(lost ? kWeightVariants : pending_.last_variant);
    }
    pending_ = Pending{};
}

void Streamer::late_load() {
    const int il = pending_.il;
    terminal_[static_cast<size_t>(il)] = -1;  // forget the guess: re-learned on the next graph
    pending_.deferred = false;
    pending_.last_variant = -1;
    load_now(il);
}

void Streamer::decide(const ggml_tensor * w, int64_t ss, int64_t ts) {
    const uint64_t t0 = now_ns();
    const int64_t k = pending_.k, n_tokens = pending_.n_tokens;
    auto * wbase = static_cast<uint8_t *>(w->data);
    const ggml_tensor * topk = pending_.topk;
    auto * ibase = static_cast<uint8_t *>(topk->data);
    row_w_.resize(static_cast<size_t>(k));
    row_dropped_.resize(static_cast<size_t>(k));
    const bool repoint = (params_.debug_flags & kDebugNoRepoint) == 0;
    const bool pin = (params_.debug_flags & kDebugNoPin) == 0;
    for (int64_t tok = 0; tok < n_tokens; ++tok) {
        int32_t * ids = ids_flat_.data() + tok * k;
        for (int64_t j = 0; j < k; ++j) {
            row_w_[static_cast<size_t>(j)] = *reinterpret_cast<const float *>(wbase + tok * ts + j * ss);
        }
        const DropRowResult r = drop_row(k, row_w_.data(), ids, resident_flat_.data() + tok * k,
                                         params_.drop_frac, params_.drop_renorm != 0,
                                         row_dropped_.data(), pin);
        c_.experts_dropped += static_cast<uint64_t>(r.dropped);
        if (phase_ == 1) c_.decode_dropped_weight += r.dropped_weight;
        if (r.dropped == 0) continue;
        for (int64_t j = 0; j < k; ++j) {
            *reinterpret_cast<float *>(wbase + tok * ts + j * ss) = row_w_[static_cast<size_t>(j)];
            if (!row_dropped_[static_cast<size_t>(j)]) continue;
            if (pending_.route >= 0) route_dropped_[pending_.route_slot0 + static_cast<size_t>(tok * k + j)] = 1;
            if (repoint) {
                *reinterpret_cast<int32_t *>(ibase + j * topk->nb[0] + tok * topk->nb[1]) = ids[j];
            } else {
                ids[j] = -1;  // the guard's control: the graph keeps the id, the load skips it
            }
        }
    }
    c_.mgmt_ns += now_ns() - t0;
}

void Streamer::load_now(int il) {
    const uint64_t t0 = now_ns();
    const Layer & layer = *cache_.layer(il);
    // Distinct experts in first-seen order; duplicates (and dropped slots, repointed onto the
    // row's top expert) are not looked up again.
    seen_.assign(static_cast<size_t>(layer.n_expert), 0);
    ids_.clear();
    for (int32_t e : ids_flat_) {
        if (e < 0 || seen_[static_cast<size_t>(e)]) continue;
        seen_[static_cast<size_t>(e)] = 1;
        ids_.push_back(e);
    }
    c_.mgmt_ns += now_ns() - t0;
    cache_.load(il, ids_, *files_, c_);
}

void Streamer::fail(const std::string & message) {
    if (fatal_.empty()) fatal_ = "expert streaming failed: " + message;
    if (abort_ != nullptr) wb_abort_flag_set_fatal(abort_, 1);
}

}  // namespace wb
