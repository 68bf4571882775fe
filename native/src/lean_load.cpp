// The lean streamed load: llama.cpp maps a model with MAP_POPULATE and advises WILLNEED over the
// whole file, so a streamed model would be read whole at load. There is no public switch, and we
// do not patch llama.cpp; instead, for the duration of one load, libllama's own GOT entries for
// mmap/mmap64 and posix_madvise point at wrappers. For a mapping of one of the model's files
// they drop MAP_POPULATE, put zero pages over the ranges the caller names (the tensors the
// streamer reads itself), and narrow WILLNEED to the rest (metadata, dense weights left on the
// mapping). Every other call passes straight through, and only the thread that armed the load is
// affected (another thread loading a resident model at the same time keeps the normal
// behaviour). Disarming restores the entries.
#include "errors.h"
#include "workbench_native.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "llama.h"

namespace {

#if defined(__x86_64__)
constexpr uint32_t kJumpSlot = R_X86_64_JUMP_SLOT;
constexpr uint32_t kGlobDat = R_X86_64_GLOB_DAT;
#elif defined(__aarch64__)
constexpr uint32_t kJumpSlot = R_AARCH64_JUMP_SLOT;
constexpr uint32_t kGlobDat = R_AARCH64_GLOB_DAT;
#else
#define WB_LEAN_UNSUPPORTED 1
#endif

struct Range { uint64_t begin, end; };

// What one armed load knows: the model's shards and, per shard, the ranges to blank (sorted).
struct Plan {
    std::vector<std::pair<dev_t, ino_t>> shards;
    std::vector<std::vector<Range>> blank;  // file offsets, page-aligned inward
};

struct Mapping {
    uintptr_t addr;
    uint64_t len;
    int shard;  // index into Plan::shards
};

// Per thread: only the arming thread's calls are changed, and its counts are its own.
thread_local bool tl_armed = false;
thread_local Plan tl_plan;
thread_local wb_lean_load_stats tl_stats{};
thread_local std::vector<Mapping> tl_maps;  // model file mappings made while armed

int shard_of(int fd) {
    struct stat st{};
    if (fstat(fd, &st) != 0) return -1;
    for (size_t i = 0; i < tl_plan.shards.size(); ++i) {
        if (tl_plan.shards[i].first == st.st_dev && tl_plan.shards[i].second == st.st_ino) {
            return static_cast<int>(i);
        }
    }
    return -1;
}

// Replaces the planned ranges of a fresh mapping of the whole shard with anonymous zero pages:
// the capture warm-up then computes on zeros there (its output is discarded) instead of faulting
// the weights in from disk, and the session rebinds or restores those tensors before any real
// decode.
void blank_ranges(void * p, uint64_t len, int shard) {
    for (const Range & r : tl_plan.blank[shard]) {
        if (r.end > len) continue;
        void * at = static_cast<uint8_t *>(p) + r.begin;
        void * got = mmap(at, r.end - r.begin, PROT_READ,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
        if (got == MAP_FAILED) {
            ++tl_stats.blank_failures;  // that range keeps its file pages: correct, just read
        } else {
            tl_stats.blanked_bytes += r.end - r.begin;
        }
    }
}

void * lean_mmap(void * addr, size_t len, int prot, int flags, int fd, off_t off) {
    if (!tl_armed || fd < 0 || (flags & MAP_ANONYMOUS)) {
        return mmap(addr, len, prot, flags, fd, off);
    }
    const int shard = shard_of(fd);
    if (shard < 0) return mmap(addr, len, prot, flags, fd, off);  // not the model: untouched
    if (flags & MAP_POPULATE) {
        flags &= ~MAP_POPULATE;
        ++tl_stats.populate_stripped;
    }
    void * p = mmap(addr, len, prot, flags, fd, off);
    if (p != MAP_FAILED) {
        ++tl_stats.file_maps;
        tl_stats.file_map_bytes += len;
        if (off == 0 && !(prot & PROT_WRITE)) blank_ranges(p, len, shard);
        tl_maps.push_back({reinterpret_cast<uintptr_t>(p), len, shard});
    }
    return p;
}

// WILLNEED over a model mapping becomes WILLNEED over what was not blanked (metadata, and the
// dense weights when they stay on the mapping).
int lean_posix_madvise(void * addr, size_t len, int advice) {
    if (!tl_armed || advice != POSIX_MADV_WILLNEED) return posix_madvise(addr, len, advice);
    const uintptr_t b = reinterpret_cast<uintptr_t>(addr);
    for (const Mapping & m : tl_maps) {
        if (b < m.addr || b + len > m.addr + m.len) continue;
        ++tl_stats.willneed_narrowed;
        uint64_t pos = b - m.addr;
        const uint64_t stop = pos + len;
        int rc = 0;
        auto advise = [&](uint64_t from, uint64_t to) {
            if (to <= from) return;
            tl_stats.willneed_bytes += to - from;
            if (posix_madvise(reinterpret_cast<void *>(m.addr + from), to - from, advice) != 0) rc = -1;
        };
        for (const Range & r : tl_plan.blank[m.shard]) {
            if (r.end <= pos || r.begin >= stop) continue;
            advise(pos, r.begin);
            tl_stats.willneed_skipped_bytes += std::min(r.end, stop) - std::max(r.begin, pos);
            pos = std::max(pos, r.end);
        }
        advise(pos, stop);
        return rc;
    }
    return posix_madvise(addr, len, advice);
}

struct Slot {
    void ** entry;    // the GOT entry in libllama
    void * original;  // what it held before arming (resolved address or lazy PLT stub)
    void * wrapper;
    bool relro;       // inside PT_GNU_RELRO: read-only except while we write it
};

std::mutex g_mu;
int g_arms = 0;  // arming threads; the GOT is restored when the last one disarms
std::vector<Slot> g_slots;
std::atomic<int32_t> g_patched{0};

struct Found {
    ElfW(Addr) base = 0;
    const ElfW(Phdr) * phdr = nullptr;
    ElfW(Half) phnum = 0;
    std::string name;
};

// The loaded object (libllama) whose segments contain `target`.
int find_object(dl_phdr_info * info, size_t, void * data) {
    auto * want = static_cast<std::pair<uintptr_t, Found> *>(data);
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr) & ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_LOAD) continue;
        const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
        if (want->first >= lo && want->first < lo + ph.p_memsz) {
            want->second = {info->dlpi_addr, info->dlpi_phdr, info->dlpi_phnum,
                            info->dlpi_name ? info->dlpi_name : ""};
            return 1;
        }
    }
    return 0;
}

#ifndef WB_LEAN_UNSUPPORTED
// glibc relocates most d_ptr values of the in-memory dynamic section; some loaders do not.
uintptr_t dyn_ptr(ElfW(Addr) base, ElfW(Addr) value) {
    return value < base ? base + value : value;
}

void * wrapper_for(const char * name) {
    if (std::strcmp(name, "mmap") == 0 || std::strcmp(name, "mmap64") == 0) {
        return reinterpret_cast<void *>(&lean_mmap);
    }
    if (std::strcmp(name, "posix_madvise") == 0) return reinterpret_cast<void *>(&lean_posix_madvise);
    return nullptr;
}

// Every GOT entry of the object that libc's mmap/mmap64/posix_madvise resolves through.
std::vector<Slot> find_slots(const Found & obj, std::string * why) {
    const ElfW(Dyn) * dyn = nullptr;
    uintptr_t relro_lo = 0, relro_hi = 0;
    for (ElfW(Half) i = 0; i < obj.phnum; ++i) {
        const ElfW(Phdr) & ph = obj.phdr[i];
        if (ph.p_type == PT_DYNAMIC) dyn = reinterpret_cast<const ElfW(Dyn) *>(obj.base + ph.p_vaddr);
        if (ph.p_type == PT_GNU_RELRO) {
            relro_lo = obj.base + ph.p_vaddr;
            relro_hi = relro_lo + ph.p_memsz;
        }
    }
    if (!dyn) {
        *why = obj.name + " has no dynamic section";
        return {};
    }
    uintptr_t jmprel = 0, rela = 0, symtab = 0, strtab = 0;
    size_t pltrelsz = 0, relasz = 0;
    int64_t pltrel = DT_RELA;
    for (const ElfW(Dyn) * d = dyn; d->d_tag != DT_NULL; ++d) {
        switch (d->d_tag) {
            case DT_JMPREL: jmprel = dyn_ptr(obj.base, d->d_un.d_ptr); break;
            case DT_PLTRELSZ: pltrelsz = d->d_un.d_val; break;
            case DT_PLTREL: pltrel = d->d_un.d_val; break;
            case DT_RELA: rela = dyn_ptr(obj.base, d->d_un.d_ptr); break;
            case DT_RELASZ: relasz = d->d_un.d_val; break;
            case DT_SYMTAB: symtab = dyn_ptr(obj.base, d->d_un.d_ptr); break;
            case DT_STRTAB: strtab = dyn_ptr(obj.base, d->d_un.d_ptr); break;
            default: break;
        }
    }
    if (!symtab || !strtab) {
        *why = obj.name + " has no dynamic symbol table";
        return {};
    }
    if (jmprel && pltrel != DT_RELA) {
        *why = obj.name + " uses REL relocations, which this build does not handle";
        return {};
    }
    const auto * syms = reinterpret_cast<const ElfW(Sym) *>(symtab);
    const char * strs = reinterpret_cast<const char *>(strtab);
    std::vector<Slot> out;
    auto scan = [&](uintptr_t table, size_t bytes) {
        const auto * r = reinterpret_cast<const ElfW(Rela) *>(table);
        for (size_t i = 0; i < bytes / sizeof(ElfW(Rela)); ++i) {
            const uint32_t type = ELF64_R_TYPE(r[i].r_info);
            if (type != kJumpSlot && type != kGlobDat) continue;
            const uint32_t sym = ELF64_R_SYM(r[i].r_info);
            if (sym == 0) continue;
            void * wrapper = wrapper_for(strs + syms[sym].st_name);
            if (!wrapper) continue;
            const uintptr_t at = obj.base + r[i].r_offset;
            out.push_back({reinterpret_cast<void **>(at), nullptr, wrapper,
                           at >= relro_lo && at < relro_hi});
        }
    };
    if (jmprel) scan(jmprel, pltrelsz);
    if (rela) scan(rela, relasz);
    return out;
}

// Writes `value` into a GOT entry, lifting RELRO's read-only protection for the moment it takes.
bool write_entry(const Slot & s, void * value, std::string * why) {
    const uintptr_t ps = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    void * page = reinterpret_cast<void *>(reinterpret_cast<uintptr_t>(s.entry) & ~(ps - 1));
    if (mprotect(page, ps, PROT_READ | PROT_WRITE) != 0) {
        *why = std::string("cannot make libllama's GOT writable: ") + std::strerror(errno);
        return false;
    }
    __atomic_store_n(s.entry, value, __ATOMIC_SEQ_CST);
    if (s.relro) mprotect(page, ps, PROT_READ);
    return true;
}
#endif

// Points libllama's entries at the wrappers (caller holds g_mu). 0, or -1 with the reason.
int32_t patch(std::string * why) {
#ifdef WB_LEAN_UNSUPPORTED
    *why = "the lean load supports x86-64 and aarch64 only";
    return -1;
#else
    std::pair<uintptr_t, Found> want{reinterpret_cast<uintptr_t>(&llama_model_load_from_file), {}};
    if (!dl_iterate_phdr(find_object, &want)) {
        *why = "libllama is not among the loaded objects";
        return -1;
    }
    std::vector<Slot> slots = find_slots(want.second, why);
    if (!why->empty()) return -1;
    bool has_mmap = false, has_madvise = false;
    for (const Slot & s : slots) {
        has_mmap |= s.wrapper == reinterpret_cast<void *>(&lean_mmap);
        has_madvise |= s.wrapper == reinterpret_cast<void *>(&lean_posix_madvise);
    }
    if (!has_mmap || !has_madvise) {
        *why = want.second.name + " imports no " + (has_mmap ? "posix_madvise" : "mmap") +
               " through its GOT (linked in another way than this build knows)";
        return -1;
    }
    for (size_t i = 0; i < slots.size(); ++i) {
        slots[i].original = __atomic_load_n(slots[i].entry, __ATOMIC_SEQ_CST);
        if (!write_entry(slots[i], slots[i].wrapper, why)) {
            std::string ignored;  // keep the first failure's reason
            for (size_t j = 0; j < i; ++j) write_entry(slots[j], slots[j].original, &ignored);
            return -1;
        }
    }
    g_slots = std::move(slots);
    g_patched.store(static_cast<int32_t>(g_slots.size()));
    return 0;
#endif
}

// Puts the original entries back (caller holds g_mu).
void unpatch() {
#ifndef WB_LEAN_UNSUPPORTED
    std::string why;
    for (const Slot & s : g_slots) write_entry(s, s.original, &why);
#endif
    g_slots.clear();
    g_patched.store(0);
}

}  // namespace

extern "C" {

int32_t wb_lean_load_begin(const char * const * paths, int32_t n_paths,
                           const struct wb_lean_range * blank, uint64_t n_blank) {
    return wb::guarded([&] {
        if (tl_armed) throw std::runtime_error("a lean load is already armed on this thread");
        Plan plan;
        const uint64_t ps = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
        for (int32_t i = 0; i < n_paths; ++i) {
            struct stat st{};
            if (stat(paths[i], &st) != 0) {
                throw std::runtime_error(std::string("cannot stat ") + paths[i] + ": " +
                                         std::strerror(errno));
            }
            plan.shards.emplace_back(st.st_dev, st.st_ino);
        }
        plan.blank.resize(plan.shards.size());
        for (uint64_t i = 0; i < n_blank; ++i) {
            const wb_lean_range & r = blank[i];
            if (r.file < 0 || r.file >= n_paths) throw std::runtime_error("a blank range names no shard");
            const uint64_t b = (r.offset + ps - 1) & ~(ps - 1);
            const uint64_t e = (r.offset + r.nbytes) & ~(ps - 1);
            if (e > b) plan.blank[r.file].push_back({b, e});
        }
        for (auto & v : plan.blank) {
            std::sort(v.begin(), v.end(), [](const Range & a, const Range & b) { return a.begin < b.begin; });
        }
        std::lock_guard<std::mutex> lock(g_mu);
        if (g_arms == 0) {
            std::string why;
            if (patch(&why) != 0) throw std::runtime_error(why);
        }
        ++g_arms;
        tl_plan = std::move(plan);
        tl_stats = wb_lean_load_stats{};
        tl_maps.clear();
        tl_armed = true;
        return 0;
    });
}

int32_t wb_lean_load_end(struct wb_lean_load_stats * out, uint64_t * bases, int32_t n_bases) {
    return wb::guarded([&] {
        if (!tl_armed) throw std::runtime_error("no lean load is armed on this thread");
        for (int32_t i = 0; bases && i < n_bases; ++i) bases[i] = 0;
        for (const Mapping & m : tl_maps) {
            if (bases && m.shard < n_bases) bases[m.shard] = m.addr;  // the last map of a shard
        }
        tl_armed = false;
        tl_maps.clear();
        tl_plan = Plan{};
        if (out) *out = tl_stats;
        std::lock_guard<std::mutex> lock(g_mu);
        if (--g_arms == 0) unpatch();
        return 0;
    });
}

int64_t wb_lean_load_restore(const char * path, uint64_t base, uint64_t offset, uint64_t nbytes) {
    int64_t restored = 0;
    const int32_t rc = wb::guarded([&] {
        const uint64_t ps = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
        const uint64_t b = (offset + ps - 1) & ~(ps - 1);
        const uint64_t e = (offset + nbytes) & ~(ps - 1);
        if (base == 0) throw std::runtime_error(std::string("no lean mapping of ") + path + " to restore");
        if (e <= b) return 0;  // nothing was blanked: the tensor never covered a whole page
        const int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) throw std::runtime_error(std::string("cannot open ") + path + ": " + std::strerror(errno));
        void * at = reinterpret_cast<void *>(base + b);
        void * got = mmap(at, e - b, PROT_READ, MAP_SHARED | MAP_FIXED, fd, static_cast<off_t>(b));
        const int err = errno;
        close(fd);
        if (got == MAP_FAILED) {
            throw std::runtime_error(std::string("cannot map ") + path + " back: " + std::strerror(err));
        }
        restored = static_cast<int64_t>(e - b);
        return 0;
    });
    return rc == 0 ? restored : -1;
}

int32_t wb_lean_load_patched(void) {
    return g_patched.load();
}

}  // extern "C"
