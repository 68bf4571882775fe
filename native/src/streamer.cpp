#include "streamer.h"

#include <cstring>
#include <stdexcept>

namespace wb {

Streamer::Streamer(const std::vector<std::string> & paths, const wb_streamer_params & params)
    : params_(params), paths_(paths), files_(new FileSet(paths, params.io_lanes, params.o_direct != 0)) {
    if (!(params.drop_frac >= 0.0f && params.drop_frac <= 1.0f)) {  // NaN fails both
        throw std::invalid_argument("drop_frac must be between 0 and 1");
    }
    if (params.drop_frac > 0.0f && params.cache_budget_bytes < 0) {
        throw std::invalid_argument("dropping cold experts needs the expert cache: without one "
                                    "every expert is a miss and dropping is a plain weight cut");
    }
    if (!(params.substitute_margin >= 0.0f && params.substitute_margin <= 1.0f)) {
        throw std::invalid_argument("substitute_margin must be between 0 and 1");
    }
    if (params.substitute_margin > 0.0f && params.cache_budget_bytes < 0) {
        throw std::invalid_argument("substitution prefers cached experts: it needs the expert "
                                    "cache");
    }
    trace_ = params.trace != 0;
    trace_scores_ = trace_ && params.trace_scores != 0;
    c_.o_direct = files_->direct() ? 1 : 0;
    c_.lanes = files_->lanes();
}

void Streamer::capture_begin() {
    if (mode_ == Mode::Stream) throw std::runtime_error("already streaming");
    mode_ = Mode::Capture;
}

void Streamer::capture_end() { mode_ = Mode::Idle; }

void Streamer::activate() {
    if (mode_ == Mode::Stream) return;
    cache_.activate(params_.cache_budget_bytes, (params_.debug_flags & kDebugPoison) != 0, c_);
    mode_ = Mode::Stream;
}

void Streamer::routes_pending(uint64_t * n_loads, uint64_t * n_slots) const {
    *n_loads = route_loads_.size();
    *n_slots = route_experts_.size();
}

void Streamer::take_routes(wb_route_load * loads, uint64_t max_loads, int32_t * experts,
                           float * weights, int8_t * residency, uint8_t * dropped,
                           uint64_t max_slots) {
    if (max_loads < route_loads_.size() || max_slots < route_experts_.size()) {
        throw std::invalid_argument("the route buffers are smaller than the routes pending");
    }
    const size_t n = route_experts_.size();
    std::memcpy(loads, route_loads_.data(), route_loads_.size() * sizeof(wb_route_load));
    std::memcpy(experts, route_experts_.data(), n * sizeof(int32_t));
    std::memcpy(weights, route_weights_.data(), n * sizeof(float));
    std::memcpy(residency, route_residency_.data(), n * sizeof(int8_t));
    std::memcpy(dropped, route_dropped_.data(), n * sizeof(uint8_t));
    route_loads_.clear();
    route_experts_.clear();
    route_weights_.clear();
    route_residency_.clear();
    route_dropped_.clear();
    pending_.route = -1;  // an open layer's record went with this batch
}

void Streamer::take_route_scores(float * out, uint64_t max) {
    if (max < route_scores_.size()) {
        throw std::invalid_argument("the score buffer is smaller than the scores pending");
    }
    std::memcpy(out, route_scores_.data(), route_scores_.size() * sizeof(float));
    route_scores_.clear();
}

}  // namespace wb
