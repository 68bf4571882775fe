// Cache-aware expert substitution, the decision for one token row (upstream's
// --expert-substitute, after Skliar et al., arXiv:2412.00099).
//
// Every expert resident in the cache has margin x (max - min of this row's scores) added to its
// score, and the top-k is taken again: a near-tie goes to the expert already in memory, a
// confident routing is untouched. The scores are the tensor the graph sorted (read in log space
// when it is a softmax's output, so that the margin is a ratio of probabilities); the router's own
// weights are applied later by the graph to whichever experts run. A row whose set of experts is
// unchanged keeps its ids exactly as the router ordered them (a reorder is not a substitution, and
// writing it would change the order the graph sums the experts in).
#pragma once

#include <cstdint>
#include <vector>

namespace wb {

struct SubstituteRowResult {
    int substituted = 0;  // experts of the new set that were not in the router's set
};

// scores: n_expert floats, `stride` bytes apart (already in the space the margin applies to);
// resident: n_expert flags; ids: the router's k ids in rank order, rewritten only when the set
// changes (then in descending adjusted score). `order` is scratch (resized here).
SubstituteRowResult substitute_row(int64_t n_expert, const float * scores, int64_t stride,
                                   const uint8_t * resident, float margin, int64_t k,
                                   int32_t * ids, std::vector<int32_t> & order);

}  // namespace wb
