// Dense (non-expert) weights: the named weight leaves the capture saw, the `anon` policy (read
// one into private memory and rebind it) and their page residency.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "reader.h"

struct ggml_tensor;

namespace wb {

class DenseWeights {
public:
    DenseWeights() = default;
    ~DenseWeights();  // restores every rebound tensor and frees its copy
    DenseWeights(const DenseWeights &) = delete;
    DenseWeights & operator=(const DenseWeights &) = delete;

    void remember(ggml_tensor * leaf);  // a named weight leaf seen during capture
    uint64_t read_anon(const std::string & name, int32_t file, uint64_t offset, uint64_t nbytes,
                       FileSet & files);
    // Share of the non-expert leaves' pages resident in RAM (mincore), or -1.
    double resident_frac() const;

private:
    struct Copy {
        ggml_tensor * tensor;
        void * original;
        void * buffer;
    };
    std::unordered_map<std::string, ggml_tensor *> leaves_;
    std::vector<Copy> copies_;
};

}  // namespace wb
