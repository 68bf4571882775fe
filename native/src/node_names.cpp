#include "node_names.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace wb {

namespace {

constexpr const char * kExpertSuffixes[] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps",
                                            "ffn_gate_up_exps"};
constexpr const char * kWeightSuffixes[kWeightVariants] = {"-", "_softmax-", "_norm-", "_scaled-"};

// A layer index that is the whole rest of the name.
int layer_index(const char * digits) {
    if (*digits < '0' || *digits > '9') return -1;
    char * end = nullptr;
    const long il = std::strtol(digits, &end, 10);
    return (*end == '\0' && il < (1 << 20)) ? static_cast<int>(il) : -1;
}

}  // namespace

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

int topk_layer(const char * name) {
    if (std::strncmp(name, "ffn_moe_topk-", 13) != 0) return -1;
    return layer_index(name + 13);
}

int weights_layer(const char * name, int * variant) {
    if (std::strncmp(name, "ffn_moe_weights", 15) != 0) return -1;
    const char * rest = name + 15;
    for (int v = 0; v < kWeightVariants; ++v) {
        const size_t n = std::strlen(kWeightSuffixes[v]);
        if (std::strncmp(rest, kWeightSuffixes[v], n) == 0) {
            const int il = layer_index(rest + n);
            if (il >= 0) *variant = v;
            return il;
        }
    }
    return -1;
}

}  // namespace wb
