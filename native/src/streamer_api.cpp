// The flat C ABI over wb::Streamer: every export catches and reports through wb_last_error().
#include <cstring>
#include <string>
#include <vector>

#include "drop_policy.h"
#include "errors.h"
#include "streamer.h"
#include "substitute_policy.h"
#include "workbench_native.h"

struct wb_streamer {
    wb::Streamer impl;
    wb_streamer(const std::vector<std::string> & paths, const wb_streamer_params & p) : impl(paths, p) {}
};

extern "C" {

wb_streamer * wb_streamer_new(const char * const * paths, int32_t n_paths, wb_streamer_params params) {
    wb_streamer * out = nullptr;
    wb::guarded([&] {
        if (paths == nullptr || n_paths <= 0) throw std::invalid_argument("no model files given");
        std::vector<std::string> files(paths, paths + n_paths);
        out = new wb_streamer(files, params);
        return 0;
    });
    return out;
}

void wb_streamer_free(wb_streamer * s) { delete s; }

bool wb_streamer_eval(ggml_tensor * t, bool ask, void * user_data) {
    return static_cast<wb_streamer *>(user_data)->impl.eval(t, ask);
}

int32_t wb_streamer_capture_begin(wb_streamer * s) {
    return wb::guarded([&] { s->impl.capture_begin(); return 0; });
}

int32_t wb_streamer_capture_end(wb_streamer * s) {
    return wb::guarded([&] { s->impl.capture_end(); return 0; });
}

int32_t wb_streamer_captured_experts(wb_streamer * s, char * buf, size_t buf_size) {
    return wb::guarded([&] {
        std::string joined;
        for (const auto & name : s->impl.captured_expert_names()) {
            joined += name;
            joined.push_back('\n');
        }
        return wb::copy_out(joined, buf, buf_size);
    });
}

int32_t wb_streamer_bind_expert(wb_streamer * s, const char * name, int32_t file, uint64_t offset,
                                uint64_t nbytes, int64_t n_expert) {
    return wb::guarded([&] { s->impl.bind_expert(name, file, offset, nbytes, n_expert); return 0; });
}

int32_t wb_streamer_activate(wb_streamer * s) {
    return wb::guarded([&] { s->impl.activate(); return 0; });
}

int32_t wb_streamer_dense_anon(wb_streamer * s, const char * name, int32_t file, uint64_t offset,
                               uint64_t nbytes) {
    return wb::guarded([&] { s->impl.dense_anon(name, file, offset, nbytes); return 0; });
}

int32_t wb_streamer_set_budget(wb_streamer * s, int64_t bytes) {
    return wb::guarded([&] { s->impl.set_budget(bytes); return 0; });
}

void wb_streamer_set_phase(wb_streamer * s, int32_t phase) { s->impl.set_phase(phase); }

void wb_streamer_set_position(wb_streamer * s, int64_t position) { s->impl.set_position(position); }

int32_t wb_streamer_routes_pending(const wb_streamer * s, uint64_t * n_loads, uint64_t * n_slots) {
    return wb::guarded([&] { s->impl.routes_pending(n_loads, n_slots); return 0; });
}

int32_t wb_streamer_take_routes(wb_streamer * s, wb_route_load * loads, uint64_t max_loads,
                                int32_t * experts, float * weights, int8_t * residency,
                                uint8_t * dropped, uint64_t max_slots) {
    return wb::guarded([&] {
        s->impl.take_routes(loads, max_loads, experts, weights, residency, dropped, max_slots);
        return 0;
    });
}

int32_t wb_streamer_route_scores_pending(const wb_streamer * s, uint64_t * n) {
    return wb::guarded([&] { *n = s->impl.route_scores_pending(); return 0; });
}

int32_t wb_streamer_take_route_scores(wb_streamer * s, float * out, uint64_t max) {
    return wb::guarded([&] { s->impl.take_route_scores(out, max); return 0; });
}

int32_t wb_drop_row(int64_t k, float * w, int32_t * ids, const uint8_t * resident, float frac,
                    int32_t renorm, int32_t pin_top, uint8_t * dropped, double * dropped_weight,
                    double * total_weight) {
    const wb::DropRowResult r = wb::drop_row(k, w, ids, resident, frac, renorm != 0, dropped,
                                             pin_top != 0);
    *dropped_weight = r.dropped_weight;
    *total_weight = r.total_weight;
    return r.dropped;
}

int32_t wb_substitute_row(int64_t n_expert, const float * scores, const uint8_t * resident,
                          float margin, int64_t k, int32_t * ids) {
    return wb::guarded([&] {
        if (n_expert <= 0 || k <= 0 || k > n_expert) throw std::invalid_argument("bad row shape");
        std::vector<int32_t> order;
        return wb::substitute_row(n_expert, scores, sizeof(float), resident, margin, k, ids, order)
            .substituted;
    });
}

int32_t wb_streamer_substituted_map(const wb_streamer * s, int32_t n_layer, int32_t n_expert,
                                    uint32_t * out) {
    return wb::guarded([&] {
        if (n_layer < 0 || n_expert < 0) throw std::invalid_argument("negative map shape");
        if (out == nullptr && static_cast<int64_t>(n_layer) * n_expert > 0) throw std::invalid_argument("no output buffer given");
        s->impl.substituted_map(n_layer, n_expert, out);
        return 0;
    });
}

double wb_streamer_dense_resident_frac(const wb_streamer * s) {
    return s->impl.dense_resident_frac();
}

void wb_streamer_counters(const wb_streamer * s, wb_stream_counters * out) { s->impl.counters(out); }

int32_t wb_streamer_layer_experts(const wb_streamer * s, int64_t * out, int32_t cap) {
    return wb::guarded([&] {
        if (out == nullptr && cap > 0) throw std::invalid_argument("no output buffer given");
        return static_cast<int>(s->impl.layer_experts(out, cap > 0 ? static_cast<size_t>(cap) : 0));
    });
}

int32_t wb_streamer_expert_map(const wb_streamer * s, int32_t n_layer, int32_t n_expert,
                               uint32_t * routed_out, uint8_t * resident_out) {
    return wb::guarded([&] {
        if (n_layer < 0 || n_expert < 0) throw std::invalid_argument("negative map shape");
        if ((routed_out == nullptr || resident_out == nullptr) &&
            static_cast<int64_t>(n_layer) * n_expert > 0) {
            throw std::invalid_argument("no output buffers given");
        }
        s->impl.expert_map(n_layer, n_expert, routed_out, resident_out);
        return 0;
    });
}

int32_t wb_streamer_set_cache_policy(wb_streamer * s, int32_t policy, int32_t guard) {
    return wb::guarded([&] { s->impl.set_cache_policy(policy, guard); return 0; });
}

int32_t wb_streamer_set_prefetch(wb_streamer * s, int32_t on) {
    return wb::guarded([&] { s->impl.set_prefetch(on != 0); return 0; });
}

int32_t wb_streamer_cache_stats(wb_streamer * s, wb_cache_stats * out) {
    return wb::guarded([&] { s->impl.cache_stats(out); return 0; });
}

int32_t wb_streamer_preload(wb_streamer * s, const int32_t * layers, const int32_t * experts,
                            uint64_t n) {
    return wb::guarded([&] {
        if (n > 0 && (layers == nullptr || experts == nullptr)) throw std::invalid_argument("no entries given");
        return static_cast<int>(s->impl.preload(layers, experts, static_cast<size_t>(n)));
    });
}

int32_t wb_streamer_entry_states(const wb_streamer * s, int32_t n_layer, int32_t n_expert,
                                 uint8_t * out) {
    return wb::guarded([&] {
        if (n_layer < 0 || n_expert < 0) throw std::invalid_argument("negative map shape");
        if (out == nullptr && static_cast<int64_t>(n_layer) * n_expert > 0) throw std::invalid_argument("no output buffer given");
        s->impl.entry_states(n_layer, n_expert, out);
        return 0;
    });
}

void wb_streamer_set_abort_flag(wb_streamer * s, wb_abort_flag * flag) { s->impl.set_abort_flag(flag); }

int32_t wb_streamer_fatal(const wb_streamer * s, char * buf, size_t buf_size) {
    return wb::copy_out(s->impl.fatal(), buf, buf_size);
}

}  // extern "C"
