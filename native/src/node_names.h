// Parsing the names llama.cpp gives graph nodes and weights (one place, so the hook stays small).
#pragma once

namespace wb {

// "blk.<il>.<suffix>.weight" for an expert suffix: returns il (and the projection kind 0..3), or
// -1 for any other name.
int expert_layer(const char * name, int * proj_kind);

// "ffn_moe_topk-<il>": returns il, or -1.
int topk_layer(const char * name);

// The router-weight chain of a MoE layer, in graph order: "ffn_moe_weights-<il>",
// "ffn_moe_weights_softmax-<il>", "ffn_moe_weights_norm-<il>", "ffn_moe_weights_scaled-<il>"
// (exact: a '-' right after the variant, so "ffn_moe_weights_sum-" is not one). Returns il and
// sets *variant to 0..3, or returns -1.
constexpr int kWeightVariants = 4;
int weights_layer(const char * name, int * variant);

}  // namespace wb
