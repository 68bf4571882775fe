// Cache-aware expert dropping, the decision for one token row (upstream's --drop-cold-experts).
//
// A slot is dropped iff it is not the row's top-weighted slot, its expert is a cache miss, and
// its final router weight is below frac / k (k = the effective top-k, the graph's). The top slot
// is pinned even when its own weight is below the threshold (an unnormalised router, or top-k 1
// where the threshold is frac itself): a row keeps at least its strongest expert. A dropped slot's weight
// becomes 0 and its id is repointed to the top-weighted expert, which is certainly loaded, so the
// expert matmul multiplies resident memory by 0 instead of reading a slot never filled. With
// renorm the survivors are scaled so the row keeps its original total.
#pragma once

#include <cstdint>

namespace wb {

struct DropRowResult {
    int dropped = 0;
    double dropped_weight = 0.0;  // router weight the row lost (before renormalisation)
    double total_weight = 0.0;    // the row's total router weight
};

// w, ids, resident, dropped_out: k entries each. Edits w and ids in place. `pin_top` false is
// the pin's negative control (tests only): the top slot is then judged like the others.
DropRowResult drop_row(int64_t k, float * w, int32_t * ids, const uint8_t * resident, float frac,
                       bool renorm, uint8_t * dropped_out, bool pin_top = true);

}  // namespace wb
