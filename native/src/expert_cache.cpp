#include "expert_cache.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "ggml.h"
#include "pages.h"

namespace wb {

ExpertCache::~ExpertCache() {
    prefetcher_.reset();  // joins its thread: no read may land in memory unmapped below
    for (auto & layer : layers_) {
        for (auto & p : layer.projs) {
            if (p.tensor != nullptr && p.original != nullptr) p.tensor->data = p.original;
            if (lru_ && p.reservation != nullptr) munmap(p.reservation, p.stride * layer.n_expert + 2 * page_size());
        }
    }
    for (size_t i = 0; i < shared_slots_.size(); ++i) munmap(shared_slots_[i], shared_sizes_[i]);
}

void ExpertCache::add_projection(int il, ggml_tensor * src) {
    if (static_cast<size_t>(il) >= layers_.size()) layers_.resize(static_cast<size_t>(il) + 1);
    Layer & layer = layers_[static_cast<size_t>(il)];
    for (const auto & p : layer.projs) {
        if (p.tensor == src) return;
    }
    Projection p;
    p.tensor = src;
    p.name = src->name;
    p.stride = src->nb[2];
    layer.projs.push_back(p);
}

std::vector<std::string> ExpertCache::names() const {
    std::vector<std::string> names;
    for (const auto & layer : layers_) {
        for (const auto & p : layer.projs) names.push_back(p.name);
    }
    return names;
}

void ExpertCache::bind(const std::string & name, int32_t file, uint64_t offset, uint64_t nbytes,
                       int64_t n_expert) {
    for (auto & layer : layers_) {
        for (auto & p : layer.projs) {
            if (p.name != name) continue;
            if (p.tensor->ne[2] != n_expert) {
                throw std::runtime_error("inconsistent expert count for " + name + ": the graph has " +
                                         std::to_string(p.tensor->ne[2]) + ", the GGUF says " +
                                         std::to_string(n_expert));
            }
            if (p.stride * static_cast<uint64_t>(n_expert) != nbytes) {
                throw std::runtime_error("expert tensor " + name + " is not laid out expert-major");
            }
            p.file = file;
            p.offset = offset;
            layer.n_expert = n_expert;
            return;
        }
    }
    throw std::runtime_error("expert tensor " + name + " was not captured");
}

void ExpertCache::activate(int64_t budget_bytes, bool poison, wb_stream_counters & c) {
    size_t entries = 0;
    base_.assign(layers_.size(), 0);
    for (size_t il = 0; il < layers_.size(); ++il) {
        Layer & layer = layers_[il];
        layer.entry_bytes = 0;
        for (const auto & p : layer.projs) {
            if (p.file < 0) throw std::runtime_error("expert tensor " + p.name + " has no file position");
            layer.entry_bytes += p.stride;
        }
        base_[il] = entries;
        entries += static_cast<size_t>(layer.n_expert);
    }
    if (entries == 0) throw std::runtime_error("no MoE expert tensors captured: is this a MoE model?");
    // Every region gets a page of slack on each side and starts at the same offset within its
    // page as the tensor's data within the file: O_DIRECT windows then land in place (no copy),
    // and what they carry beyond a slice is the file's own neighbouring bytes.
    const uint64_t ps = page_size();
    lru_ = budget_bytes >= 0;
    poison_ = poison && lru_;
    if (lru_) {
        budget_ = static_cast<uint64_t>(budget_bytes);
        for (auto & layer : layers_) {
            for (auto & p : layer.projs) {
                p.reservation = reserve(p.stride * layer.n_expert + 2 * ps);
                p.region = p.reservation + ps + p.offset % ps;
                if (poison_) std::memset(p.region, 0xFF, p.stride * layer.n_expert);
            }
        }
    } else {
        // One slot per projection position, as wide as the widest layer: one layer computes at a
        // time, so every layer can share it (each at its own offset within the first page).
        for (const auto & layer : layers_) {
            for (size_t k = 0; k < layer.projs.size(); ++k) {
                if (shared_sizes_.size() <= k) shared_sizes_.resize(k + 1, 0);
                const uint64_t size = layer.projs[k].stride * layer.n_expert + 2 * ps;
                if (shared_sizes_[k] < size) shared_sizes_[k] = size;
            }
        }
        for (size_t size : shared_sizes_) shared_slots_.push_back(reserve(size));
        for (auto & layer : layers_) {
            for (size_t k = 0; k < layer.projs.size(); ++k) {
                auto & p = layer.projs[k];
                p.region = shared_slots_[k] + ps + p.offset % ps;
            }
        }
    }
    valid_.assign(entries, 0);
    ever_evicted_.assign(entries, 0);
    routed_.assign(entries, 0);
    stamp_.assign(entries, 0);
    prev_.assign(entries, -1);
    next_.assign(entries, -1);
    crf_.assign(entries, 0.0);
    tick_.assign(entries, 0);
    transient_.assign(entries, 0);
    preloaded_.assign(entries, 0);
    ahead_.assign(entries, 0);
    last_ids_.assign(layers_.size(), {});
    for (auto & layer : layers_) {
        for (auto & p : layer.projs) {
            p.original = p.tensor->data;
            p.tensor->data = p.region;
            // The mmap pages the warm-up faulted in are no longer referenced.
            discard_inward(p.original, p.stride * layer.n_expert);
        }
    }
    c.budget_now = lru_ ? budget_ : 0;
    active_ = true;
}

void ExpertCache::load(int il, const std::vector<int64_t> & ids, FileSet & files,
                       wb_stream_counters & c) {
    settle(c);
    const uint64_t t0 = now_ns();
    Layer & layer = layers_[static_cast<size_t>(il)];
    // Close the previous pass over the layers when the layer index does not increase.
    if (il <= last_il_) {
        c.token_demand = pass_bytes_;
        c.layer_demand = pass_layer_max_;
        pass_bytes_ = pass_layer_max_ = 0;
        if (lru_) {
            for (double & v : crf_) v *= kDecay;  // every policy's state, whichever runs
        }
    }
    last_il_ = il;
    ++generation_;
    ++c.loads;
    const uint64_t layer_bytes = layer.entry_bytes * ids.size();
    pass_bytes_ += layer_bytes;
    if (layer_bytes > pass_layer_max_) pass_layer_max_ = layer_bytes;
    jobs_.clear();
    const bool guarding = lru_ && guard_ && budget_ < c.token_demand;
    stats_.guard_active = guarding ? 1 : 0;
    for (int64_t e : ids) {
        if (lru_) {
            const size_t entry = entry_index(il, e);
            ++c.lookups;
            stamp_[entry] = generation_;
            tick_[entry] = ++tick_now_;
            crf_[entry] += 1.0;
            if (valid_[entry]) {
                ++c.hits;
                if (preloaded_[entry]) {
                    ++stats_.preload_hits;
                    preloaded_[entry] = 0;
                }
                if (ahead_[entry]) {
                    ++stats_.prefetch_hits;
                    stats_.prefetch_hit_bytes += layer.entry_bytes;
                    ahead_[entry] = 0;
                }
                lru_unlink(entry);
                lru_push_front(entry);
                continue;
            }
            if (ever_evicted_[entry]) ++c.rereads;
            transient_[entry] = guarding && c.resident_now + layer.entry_bytes > budget_ ? 1 : 0;
            stats_.transient_admissions += transient_[entry];
            valid_[entry] = 1;
            c.resident_now += layer.entry_bytes;
            lru_push_front(entry);
        }
        for (auto & p : layer.projs) {
            const uint64_t at = p.stride * static_cast<uint64_t>(e);
            jobs_.push_back({p.file, p.offset + at, p.stride, p.region + at, true});
            c.requested_bytes += p.stride;
        }
    }
    const uint64_t t1 = now_ns();
    c.read_bytes += files.read_all(jobs_);
    const uint64_t t2 = now_ns();
    if (lru_) evict_until_under_budget(c);
    if (prefetcher_ && decode_) issue_prefetch(il, ids, c);
    c.io_ns += t2 - t1;
    c.mgmt_ns += (t1 - t0) + (now_ns() - t2);
}

void ExpertCache::enable_prefetch(const std::vector<std::string> & paths, int lanes, bool direct) {
    if (!lru_) throw std::runtime_error("prefetch needs the expert cache: there is nowhere to read ahead into");
    if (!prefetcher_) prefetcher_.reset(new Prefetcher(paths, lanes, direct));
}

void ExpertCache::settle(wb_stream_counters & c) {
    if (!prefetcher_) return;
    const uint64_t waited = prefetcher_->wait();
    stats_.prefetch_wait_ns += waited;
    c.io_ns += waited;  // the eval thread waited for reads
    stats_.prefetch_bytes = prefetcher_->bytes();
    stats_.prefetch_read_ns = prefetcher_->read_ns();
}

void ExpertCache::issue_prefetch(int il, const std::vector<int64_t> & ids, wb_stream_counters & c) {
    last_ids_[static_cast<size_t>(il)] = ids;
    // The next layer the cache manages, wrapping to the first (the next token's).
    size_t next = static_cast<size_t>(il);
    do {
        next = (next + 1) % layers_.size();
    } while (layers_[next].n_expert == 0);
    const Layer & layer = layers_[next];
    std::vector<ReadJob> jobs;
    for (int64_t e : last_ids_[next]) {
        const size_t entry = entry_index(static_cast<int>(next), e);
        if (valid_[entry]) continue;
        valid_[entry] = 1;
        ahead_[entry] = 1;
        tick_[entry] = ++tick_now_;
        stamp_[entry] = generation_;
        c.resident_now += layer.entry_bytes;
        lru_push_front(entry);
        ++stats_.prefetch_issued;
        for (const auto & p : layer.projs) {
            const uint64_t at = p.stride * static_cast<uint64_t>(e);
            jobs.push_back({p.file, p.offset + at, p.stride, p.region + at, true});
        }
    }
    prefetcher_->submit(std::move(jobs));
}

void ExpertCache::evict_until_under_budget(wb_stream_counters & c) {
    if (policy_ != CachePolicy::Lru || guard_) {
        evict_by_policy(c);
        return;
    }
    // Never evict what this load just stamped: resident may exceed the budget transiently.
    while (c.resident_now > budget_ && tail_ >= 0 && stamp_[static_cast<size_t>(tail_)] != generation_) {
        evict(static_cast<size_t>(tail_), c);
    }
}

void ExpertCache::evict_by_policy(wb_stream_counters & c) {
    // This load's transient entries (the guard's) are needed by its compute and leave at the
    // next load: they do not push a pinned entry out.
    uint64_t passing = 0;
    if (guard_) {
        for (size_t entry = 0; entry < valid_.size(); ++entry) {
            if (valid_[entry] && transient_[entry] && stamp_[entry] == generation_) {
                passing += layers_[static_cast<size_t>(layer_of(entry))].entry_bytes;
            }
        }
    }
    if (c.resident_now - passing <= budget_) return;
    // One pass over the entries for the keys, then evictions in key order until within the
    // budget: O(entries log entries) per load that must evict, cheap next to one read.
    const int n_layers = static_cast<int>(layers_.size());
    candidates_.clear();
    for (size_t entry = 0; entry < valid_.size(); ++entry) {
        if (!valid_[entry] || stamp_[entry] == generation_) continue;
        candidates_.emplace_back(eviction_key(policy_, transient_[entry] != 0, crf_[entry],
                                              tick_[entry], layer_of(entry), last_il_, n_layers),
                                 entry);
    }
    std::sort(candidates_.begin(), candidates_.end(),
              [](const auto & a, const auto & b) { return a.first < b.first; });
    for (const auto & cand : candidates_) {
        if (c.resident_now - passing <= budget_) break;
        evict(cand.second, c);
    }
}

int ExpertCache::layer_of(size_t entry) const {
    // base_ is ascending: the last layer whose first entry is at or before `entry` and which
    // has experts (a dense layer shares its base with the next one).
    const auto it = std::upper_bound(base_.begin(), base_.end(), entry);
    size_t il = static_cast<size_t>(it - base_.begin()) - 1;
    while (il > 0 && layers_[il].n_expert == 0) --il;
    return static_cast<int>(il);
}

size_t ExpertCache::preload(const int32_t * layers, const int32_t * experts, size_t n,
                            FileSet & files, wb_stream_counters & c) {
    if (!lru_) throw std::runtime_error("the expert cache is off: there is nothing to preload into");
    settle(c);
    const uint64_t t0 = now_ns();
    jobs_.clear();
    size_t taken = 0;
    for (size_t i = 0; i < n; ++i) {
        const Layer * layer = this->layer(layers[i]);
        if (layer == nullptr || experts[i] < 0 || experts[i] >= layer->n_expert) continue;
        const size_t entry = entry_index(layers[i], experts[i]);
        if (valid_[entry]) continue;
        if (c.resident_now + layer->entry_bytes > budget_) break;  // in order, within the budget
        valid_[entry] = 1;
        preloaded_[entry] = 1;
        tick_[entry] = ++tick_now_;
        c.resident_now += layer->entry_bytes;
        lru_push_front(entry);
        for (const auto & p : layer->projs) {
            const uint64_t at = p.stride * static_cast<uint64_t>(experts[i]);
            jobs_.push_back({p.file, p.offset + at, p.stride, p.region + at, true});
        }
        ++taken;
        stats_.preloaded_bytes += layer->entry_bytes;
    }
    // Not a decode's read: kept out of read_bytes and io_ns, counted on its own.
    stats_.preload_read_bytes += files.read_all(jobs_);
    stats_.preloaded_entries += taken;
    stats_.preload_ns += now_ns() - t0;
    return taken;
}

void ExpertCache::cache_stats(wb_cache_stats * out) {
    if (prefetcher_) {
        prefetcher_->quiesce();
        stats_.prefetch_bytes = prefetcher_->bytes();
        stats_.prefetch_read_ns = prefetcher_->read_ns();
    }
    *out = stats_;
    out->policy = static_cast<int32_t>(policy_);
    out->prefetch = prefetcher_ ? 1 : 0;
    out->guard = guard_ ? 1 : 0;
}

void ExpertCache::entry_states(int32_t n_layer, int32_t n_expert, uint8_t * out) const {
    const size_t rows = static_cast<size_t>(n_layer), cols = static_cast<size_t>(n_expert);
    std::memset(out, 0, rows * cols);
    if (!active_ || !lru_) return;
    for (size_t il = 0; il < rows && il < layers_.size(); ++il) {
        const size_t n = std::min(static_cast<size_t>(layers_[il].n_expert), cols);
        for (size_t e = 0; e < n; ++e) {
            const size_t entry = base_[il] + e;
            if (!valid_[entry]) continue;
            out[il * cols + e] = transient_[entry] ? 2 : (preloaded_[entry] || ahead_[entry]) ? 3 : 1;
        }
    }
}

void ExpertCache::evict(size_t entry, wb_stream_counters & c) {
    const size_t il = static_cast<size_t>(layer_of(entry));
    Layer & layer = layers_[il];
    const uint64_t e = entry - base_[il];
    for (auto & p : layer.projs) {
        if (poison_) {
            std::memset(p.region + p.stride * e, 0xFF, p.stride);
        } else {
            discard_inward(p.region + p.stride * e, p.stride);
        }
    }
    lru_unlink(entry);
    valid_[entry] = 0;
    transient_[entry] = 0;
    if (preloaded_[entry]) {
        preloaded_[entry] = 0;
        ++stats_.preload_unused;
    }
    if (ahead_[entry]) {
        ahead_[entry] = 0;
        stats_.prefetch_wasted_bytes += layer.entry_bytes;
    }
    ever_evicted_[entry] = 1;
    c.resident_now -= layer.entry_bytes;
    ++c.evictions;
}

void ExpertCache::lru_unlink(size_t entry) {
    const int64_t p = prev_[entry], n = next_[entry];
    if (p >= 0) next_[static_cast<size_t>(p)] = n; else if (head_ == static_cast<int64_t>(entry)) head_ = n;
    if (n >= 0) prev_[static_cast<size_t>(n)] = p; else if (tail_ == static_cast<int64_t>(entry)) tail_ = p;
    prev_[entry] = next_[entry] = -1;
}

void ExpertCache::lru_push_front(size_t entry) {
    prev_[entry] = -1;
    next_[entry] = head_;
    if (head_ >= 0) prev_[static_cast<size_t>(head_)] = static_cast<int64_t>(entry);
    head_ = static_cast<int64_t>(entry);
    if (tail_ < 0) tail_ = head_;
}

void ExpertCache::set_budget(int64_t bytes, wb_stream_counters & c) {
    if (!lru_) throw std::runtime_error("the expert cache is off for this session: reopen with a cache to size it");
    settle(c);
    budget_ = bytes > 0 ? static_cast<uint64_t>(bytes) : 0;
    ++generation_;  // nothing is protected between generations
    evict_until_under_budget(c);
    c.budget_now = budget_;
    ++c.resizes;
}

size_t ExpertCache::layer_experts(int64_t * out, size_t cap) const {
    const size_t n = layers_.size() < cap ? layers_.size() : cap;
    for (size_t il = 0; il < n; ++il) out[il] = layers_[il].n_expert;
    return layers_.size();
}

void ExpertCache::expert_map(int32_t n_layer, int32_t n_expert, uint32_t * routed_out,
                             uint8_t * resident_out) const {
    // Row-major [n_layer][n_expert]; cells the streamer does not manage (dense layers, layers
    // past the last MoE one, expert ids past a layer's count) are 0. One memcpy per MoE layer.
    const size_t rows = static_cast<size_t>(n_layer), cols = static_cast<size_t>(n_expert);
    std::memset(routed_out, 0, rows * cols * sizeof(uint32_t));
    std::memset(resident_out, 0, rows * cols);
    if (!active_) return;  // nothing routed yet: every entry array is empty
    for (size_t il = 0; il < rows && il < layers_.size(); ++il) {
        const size_t n = static_cast<size_t>(layers_[il].n_expert) < cols
                             ? static_cast<size_t>(layers_[il].n_expert) : cols;
        if (n == 0) continue;
        std::memcpy(routed_out + il * cols, routed_.data() + base_[il], n * sizeof(uint32_t));
        // Without a cache nothing stays resident between loads (shared slots): all zero.
        if (lru_) std::memcpy(resident_out + il * cols, valid_.data() + base_[il], n);
    }
}

}  // namespace wb
