#include "drop_policy.h"

namespace wb {

DropRowResult drop_row(int64_t k, float * w, int32_t * ids, const uint8_t * resident, float frac,
                       bool renorm, uint8_t * dropped_out, bool pin_top) {
    DropRowResult r;
    int64_t top = 0;
    for (int64_t j = 0; j < k; ++j) {
        dropped_out[j] = 0;
        r.total_weight += w[j];
        if (w[j] > w[top]) top = j;
    }
    const float threshold = frac / static_cast<float>(k);
    double kept = 0.0;
    for (int64_t j = 0; j < k; ++j) {
        if ((j != top || !pin_top) && !resident[j] && w[j] < threshold) {
            dropped_out[j] = 1;
            r.dropped_weight += w[j];
            ++r.dropped;
            w[j] = 0.0f;
            ids[j] = ids[top];  // (unpinned control: a dropped top keeps its own id, weight 0)
        } else {
            kept += w[j];
        }
    }
    if (renorm && r.dropped > 0 && kept > 0.0) {
        const double scale = r.total_weight / kept;
        for (int64_t j = 0; j < k; ++j) {
            if (!dropped_out[j]) w[j] = static_cast<float>(w[j] * scale);
        }
    }
    return r;
}

}  // namespace wb
