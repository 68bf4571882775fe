#include "streamer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "ggml.h"

namespace wb {

namespace {

constexpr const char * kTopkPrefix = "ffn_moe_topk-";
constexpr const char * kExpertSuffixes[] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps",
                                            "ffn_gate_up_exps"};

uint64_t now_ns() {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now().time_since_epoch()).count());
}

size_t page_size() {
    static const size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return size;
}

// Parses "blk.<il>.<suffix>.weight" for an expert suffix; returns il or -1.
int expert_layer(const char * name, int * proj_kind) {
    int il = -1;
    int consumed = 0;
    if (std::sscanf(name, "blk.%d.%n", &il, &consumed) != 1 || consumed == 0) return -1;
    const char * rest = name + consumed;
    for (int k = 0; k < 4; ++k) {
        const size_t n = std::strlen(kExpertSuffixes[k]);
        if (std::strncmp(rest, kExpertSuffixes[k], n) == 0 && std::strcmp(rest + n, ".weight") == 0) {
            *proj_kind = k;
            return il;
        }
    }
    return -1;
}

// Drops the pages lying entirely inside [p, p + n): neighbours sharing a boundary page keep it.
void discard_inward(void * p, uint64_t n) {
    const uint64_t ps = page_size();
    const uint64_t start = (reinterpret_cast<uint64_t>(p) + ps - 1) & ~(ps - 1);
    const uint64_t end = (reinterpret_cast<uint64_t>(p) + n) & ~(ps - 1);
    if (end > start) {
        madvise(reinterpret_cast<void *>(start), end - start, MADV_DONTNEED);
    }
}

uint8_t * reserve(uint64_t bytes) {
    // Address space only: pages are committed by the reads that fill them. Untouched pages read
    // as zeros, so memory the kernel touches but we chose not to read is always safe.
    void * p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("cannot reserve address space for experts");
    return static_cast<uint8_t *>(p);
}

}  // namespace

Streamer::Streamer(const std::vector<std::string> & paths, const wb_streamer_params & params)
    : params_(params), files_(new FileSet(paths, params.io_lanes, params.o_direct != 0)) {
    trace_ = params.trace != 0;
    c_.o_direct = files_->direct() ? 1 : 0;
    c_.lanes = files_->lanes();
}

Streamer::~Streamer() {
    for (auto & layer : layers_) {
        for (auto & p : layer.projs) {
            if (p.tensor != nullptr && p.original != nullptr) p.tensor->data = p.original;
            if (lru_ && p.reservation != nullptr) munmap(p.reservation, p.stride * layer.n_expert + 2 * page_size());
        }
    }
    for (size_t i = 0; i < shared_slots_.size(); ++i) munmap(shared_slots_[i], shared_sizes_[i]);
    for (auto & d : dense_) {
        d.tensor->data = d.original;
        std::free(d.buffer);
    }
}

void Streamer::capture_begin() {
    if (mode_ == Mode::Stream) throw std::runtime_error("already streaming");
    mode_ = Mode::Capture;
}

void Streamer::capture_end() { mode_ = Mode::Idle; }

void Streamer::capture_node(ggml_tensor * t) {
    for (int i = 0; i < GGML_MAX_SRC; ++i) {
        ggml_tensor * src = t->src[i];
        if (src == nullptr || src->name[0] == '\0' || src->op != GGML_OP_NONE) continue;
        leaves_.emplace(src->name, src);
        int kind = -1;
        const int il = expert_layer(src->name, &kind);
        if (il < 0 || src->ne[2] <= 0) continue;
        if (static_cast<size_t>(il) >= layers_.size()) layers_.resize(static_cast<size_t>(il) + 1);
        Layer & layer = layers_[static_cast<size_t>(il)];
        bool known = false;
        for (const auto & p : layer.projs) known = known || p.tensor == src;
        if (!known) {
            Projection p;
            p.tensor = src;
            p.name = src->name;
            p.stride = src->nb[2];
            layer.projs.push_back(p);
        }
    }
}

std::vector<std::string> Streamer::captured_expert_names() const {
    std::vector<std::string> names;
    for (const auto & layer : layers_) {
        for (const auto & p : layer.projs) names.push_back(p.name);
    }
    return names;
}

void Streamer::bind_expert(const std::string & name, int32_t file, uint64_t offset,
                           uint64_t nbytes, int64_t n_expert) {
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

void Streamer::activate() {
    if (mode_ == Mode::Stream) return;
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
    lru_ = params_.cache_budget_bytes >= 0;
    if (lru_) {
        budget_ = static_cast<uint64_t>(params_.cache_budget_bytes);
        for (auto & layer : layers_) {
            for (auto & p : layer.projs) {
                p.reservation = reserve(p.stride * layer.n_expert + 2 * ps);
                p.region = p.reservation + ps + p.offset % ps;
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
    for (auto & layer : layers_) {
        for (auto & p : layer.projs) {
            p.original = p.tensor->data;
            p.tensor->data = p.region;
            // The mmap pages the warm-up faulted in are no longer referenced.
            discard_inward(p.original, p.stride * layer.n_expert);
        }
    }
    c_.budget_now = lru_ ? budget_ : 0;
    mode_ = Mode::Stream;
}

uint64_t Streamer::dense_anon(const std::string & name, int32_t file, uint64_t offset,
                              uint64_t nbytes) {
    auto it = leaves_.find(name);
    if (it == leaves_.end()) throw std::runtime_error("dense tensor " + name + " was not captured");
    ggml_tensor * t = it->second;
    if (t->nb[3] * static_cast<uint64_t>(t->ne[3]) != nbytes) {
        throw std::runtime_error("dense tensor " + name + " has another size in the graph than in the GGUF");
    }
    void * buf = nullptr;
    if (posix_memalign(&buf, page_size(), nbytes) != 0) {
        throw std::runtime_error("cannot allocate memory for dense tensor " + name);
    }
    std::vector<ReadJob> jobs;
    constexpr uint64_t kChunk = 8ull << 20;
    for (uint64_t done = 0; done < nbytes; done += kChunk) {
        const uint64_t n = nbytes - done < kChunk ? nbytes - done : kChunk;
        jobs.push_back({file, offset + done, n, static_cast<uint8_t *>(buf) + done});
    }
    try {
        files_->read_all(jobs);
    } catch (...) {
        std::free(buf);
        throw;
    }
    void * original = t->data;
    t->data = buf;
    dense_.push_back({t, original, buf});
    discard_inward(original, nbytes);
    return nbytes;
}

bool Streamer::eval(ggml_tensor * t, bool ask) {
    if (mode_ == Mode::Capture) {
        if (ask) capture_node(t);
        return false;  // observe only: never isolate a node during capture
    }
    if (mode_ != Mode::Stream) return ask ? false : true;
    // The prefix test keeps every other node off this path: one memcmp per node.
    if (std::strncmp(t->name, kTopkPrefix, 13) != 0) return ask ? false : true;
    if (ask) return true;
    const int il = std::atoi(t->name + 13);
    if (il < 0 || static_cast<size_t>(il) >= layers_.size() || layers_[static_cast<size_t>(il)].n_expert == 0) {
        return true;  // a MoE layer whose experts were not captured stays resident
    }
    if (!fatal_.empty()) return true;
    try {
        load_layer(il, t);
    } catch (const std::exception & e) {
        fail(e.what());
    }
    return true;
}

void Streamer::fail(const std::string & message) {
    if (fatal_.empty()) fatal_ = "expert streaming failed: " + message;
    if (abort_ != nullptr) wb_abort_flag_set_fatal(abort_, 1);
}

void Streamer::load_layer(int il, const ggml_tensor * topk) {
    const uint64_t t0 = now_ns();
    Layer & layer = layers_[static_cast<size_t>(il)];
    const int64_t k = topk->ne[0];
    const int64_t n_tokens = topk->ne[1];
    // Close the previous pass over the layers when the layer index does not increase.
    if (il <= last_il_) {
        c_.token_demand = pass_bytes_;
        c_.layer_demand = pass_layer_max_;
        pass_bytes_ = pass_layer_max_ = 0;
    }
    last_il_ = il;
    ++generation_;
    ++c_.loads;
    seen_.assign(static_cast<size_t>(layer.n_expert), 0);
    ids_.clear();
    const auto * base = static_cast<const uint8_t *>(topk->data);
    for (int64_t tok = 0; tok < n_tokens; ++tok) {
        for (int64_t j = 0; j < k; ++j) {
            const int32_t e = *reinterpret_cast<const int32_t *>(base + j * topk->nb[0] + tok * topk->nb[1]);
            if (e < 0 || e >= layer.n_expert) throw std::runtime_error("router chose an expert out of range");
            ++c_.routed;
            ++routed_[entry_index(il, e)];
            if (!seen_[static_cast<size_t>(e)]) {
                seen_[static_cast<size_t>(e)] = 1;
                ids_.push_back(e);
            }
        }
    }
    if (trace_) {
        trace_buf_.push_back(il);
        trace_buf_.push_back(static_cast<int32_t>(ids_.size()));
        for (int64_t e : ids_) trace_buf_.push_back(static_cast<int32_t>(e));
    }
    const uint64_t layer_bytes = layer.entry_bytes * ids_.size();
    pass_bytes_ += layer_bytes;
    if (layer_bytes > pass_layer_max_) pass_layer_max_ = layer_bytes;
    jobs_.clear();
    for (int64_t e : ids_) {
        if (lru_) {
            const size_t entry = entry_index(il, e);
            ++c_.lookups;
            stamp_[entry] = generation_;
            if (valid_[entry]) {
                ++c_.hits;
                lru_unlink(entry);
                lru_push_front(entry);
                continue;
            }
            if (ever_evicted_[entry]) ++c_.rereads;
            valid_[entry] = 1;
            c_.resident_now += layer.entry_bytes;
            lru_push_front(entry);
        }
        for (auto & p : layer.projs) {
            const uint64_t at = p.stride * static_cast<uint64_t>(e);
            jobs_.push_back({p.file, p.offset + at, p.stride, p.region + at, true});
            c_.requested_bytes += p.stride;
        }
    }
    const uint64_t t1 = now_ns();
    c_.read_bytes += files_->read_all(jobs_);
    const uint64_t t2 = now_ns();
    if (lru_) evict_until_under_budget();
    c_.io_ns += t2 - t1;
    c_.mgmt_ns += (t1 - t0) + (now_ns() - t2);
}

void Streamer::evict_until_under_budget() {
    // Never evict what this load just stamped: resident may exceed the budget transiently.
    while (c_.resident_now > budget_ && tail_ >= 0 && stamp_[static_cast<size_t>(tail_)] != generation_) {
        evict(static_cast<size_t>(tail_));
    }
}

void Streamer::evict(size_t entry) {
    size_t il = 0;
    while (il + 1 < base_.size() && base_[il + 1] <= entry) ++il;
    Layer & layer = layers_[il];
    const uint64_t e = entry - base_[il];
    for (auto & p : layer.projs) discard_inward(p.region + p.stride * e, p.stride);
    lru_unlink(entry);
    valid_[entry] = 0;
    ever_evicted_[entry] = 1;
    c_.resident_now -= layer.entry_bytes;
    ++c_.evictions;
}

void Streamer::lru_unlink(size_t entry) {
    const int64_t p = prev_[entry], n = next_[entry];
    if (p >= 0) next_[static_cast<size_t>(p)] = n; else if (head_ == static_cast<int64_t>(entry)) head_ = n;
    if (n >= 0) prev_[static_cast<size_t>(n)] = p; else if (tail_ == static_cast<int64_t>(entry)) tail_ = p;
    prev_[entry] = next_[entry] = -1;
}

void Streamer::lru_push_front(size_t entry) {
    prev_[entry] = -1;
    next_[entry] = head_;
    if (head_ >= 0) prev_[static_cast<size_t>(head_)] = static_cast<int64_t>(entry);
    head_ = static_cast<int64_t>(entry);
    if (tail_ < 0) tail_ = head_;
}

void Streamer::set_budget(int64_t bytes) {
    if (!lru_) throw std::runtime_error("the expert cache is off for this session: reopen with a cache to size it");
    budget_ = bytes > 0 ? static_cast<uint64_t>(bytes) : 0;
    ++generation_;  // nothing is protected between generations
    evict_until_under_budget();
    c_.budget_now = budget_;
    ++c_.resizes;
}

void Streamer::counters(wb_stream_counters * out) const { *out = c_; }

double Streamer::dense_resident_frac() const {
    // Every named weight leaf that is not a streamed expert: wherever its data lives now (our
    // anonymous copy, or the model's mmap), count its pages that are resident.
    const uint64_t ps = page_size();
    uint64_t total = 0, resident = 0;
    std::vector<unsigned char> vec;
    for (const auto & kv : leaves_) {
        const ggml_tensor * t = kv.second;
        int kind = -1;
        if (expert_layer(t->name, &kind) >= 0 || t->data == nullptr) continue;
        const uint64_t bytes = t->nb[3] * static_cast<uint64_t>(t->ne[3]);
        const uint64_t start = reinterpret_cast<uint64_t>(t->data) & ~(ps - 1);
        const uint64_t end = (reinterpret_cast<uint64_t>(t->data) + bytes + ps - 1) & ~(ps - 1);
        const size_t pages = static_cast<size_t>((end - start) / ps);
        vec.resize(pages);
        if (mincore(reinterpret_cast<void *>(start), end - start, vec.data()) != 0) continue;
        for (unsigned char v : vec) resident += v & 1;
        total += pages;
    }
    return total > 0 ? static_cast<double>(resident) / static_cast<double>(total) : -1.0;
}

size_t Streamer::layer_experts(int64_t * out, size_t cap) const {
    const size_t n = layers_.size() < cap ? layers_.size() : cap;
    for (size_t il = 0; il < n; ++il) out[il] = layers_[il].n_expert;
    return layers_.size();
}

void Streamer::expert_map(int32_t n_layer, int32_t n_expert, uint32_t * routed_out,
                          uint8_t * resident_out) const {
    // Row-major [n_layer][n_expert]; cells the streamer does not manage (dense layers, layers
    // past the last MoE one, expert ids past a layer's count) are 0. One memcpy per MoE layer.
    const size_t rows = static_cast<size_t>(n_layer), cols = static_cast<size_t>(n_expert);
    std::memset(routed_out, 0, rows * cols * sizeof(uint32_t));
    std::memset(resident_out, 0, rows * cols);
    if (mode_ != Mode::Stream) return;  // nothing routed yet: every entry array is empty
    for (size_t il = 0; il < rows && il < layers_.size(); ++il) {
        const size_t n = static_cast<size_t>(layers_[il].n_expert) < cols
                             ? static_cast<size_t>(layers_[il].n_expert) : cols;
        if (n == 0) continue;
        std::memcpy(routed_out + il * cols, routed_.data() + base_[il], n * sizeof(uint32_t));
        // Without a cache nothing stays resident between loads (shared slots): all zero.
        if (lru_) std::memcpy(resident_out + il * cols, valid_.data() + base_[il], n);
    }
}

size_t Streamer::take_trace(int32_t * buf, size_t cap) {
    const size_t n = trace_buf_.size() < cap ? trace_buf_.size() : cap;
    std::memcpy(buf, trace_buf_.data(), n * sizeof(int32_t));
    trace_buf_.erase(trace_buf_.begin(), trace_buf_.begin() + static_cast<std::ptrdiff_t>(n));
    return n;
}

}  // namespace wb
