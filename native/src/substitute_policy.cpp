#include "substitute_policy.h"

#include <algorithm>
#include <cmath>

namespace wb {

namespace {

float score_at(const float * scores, int64_t stride, int64_t e) {
    return *reinterpret_cast<const float *>(reinterpret_cast<const uint8_t *>(scores) + e * stride);
}

}  // namespace

SubstituteRowResult substitute_row(int64_t n_expert, const float * scores, int64_t stride,
                                   const uint8_t * resident, float margin, int64_t k,
                                   int32_t * ids, std::vector<int32_t> & order) {
    SubstituteRowResult r;
    if (k <= 0 || k >= n_expert) return r;  // every expert runs: nothing to choose
    // The range over the finite scores (a grouped router masks whole groups with -inf).
    float hi = -INFINITY, lo = INFINITY;
    for (int64_t e = 0; e < n_expert; ++e) {
        const float s = score_at(scores, stride, e);
        if (!std::isfinite(s)) continue;
        hi = std::max(hi, s);
        lo = std::min(lo, s);
    }
    if (!(hi > lo)) return r;  // no spread (or no finite score): no near-tie to settle
    const float bonus = margin * (hi - lo);
    auto adjusted = [&](int32_t e) {
        const float s = score_at(scores, stride, e);
        return resident[e] ? s + bonus : s;
    };
    order.resize(static_cast<size_t>(n_expert));
    for (int64_t e = 0; e < n_expert; ++e) order[static_cast<size_t>(e)] = static_cast<int32_t>(e);
    // Highest adjusted score first; ties by the raw score, then the lower id (deterministic).
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
        const float sa = adjusted(a), sb = adjusted(b);
        if (sa != sb) return sa > sb;
        const float ra = score_at(scores, stride, a), rb = score_at(scores, stride, b);
        if (ra != rb) return ra > rb;
        return a < b;
    });
    for (int64_t j = 0; j < k; ++j) {
        const int32_t e = order[static_cast<size_t>(j)];
        if (std::find(ids, ids + k, e) == ids + k) ++r.substituted;
    }
    if (r.substituted == 0) return r;  // the same set: the router's ids stay as they are
    std::copy(order.begin(), order.begin() + k, ids);
    return r;
}

}  // namespace wb
