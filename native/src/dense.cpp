#include "dense.h"

#include <sys/mman.h>

#include <cstdlib>
#include <stdexcept>

#include "ggml.h"
#include "node_names.h"
#include "pages.h"

namespace wb {

DenseWeights::~DenseWeights() {
    for (auto & d : copies_) {
        d.tensor->data = d.original;
        std::free(d.buffer);
    }
}

void DenseWeights::remember(ggml_tensor * leaf) { leaves_.emplace(leaf->name, leaf); }

uint64_t DenseWeights::read_anon(const std::string & name, int32_t file, uint64_t offset,
                                 uint64_t nbytes, FileSet & files) {
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
        files.read_all(jobs);
    } catch (...) {
        std::free(buf);
        throw;
    }
    void * original = t->data;
    t->data = buf;
    copies_.push_back({t, original, buf});
    discard_inward(original, nbytes);
    return nbytes;
}

double DenseWeights::resident_frac() const {
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

}  // namespace wb
