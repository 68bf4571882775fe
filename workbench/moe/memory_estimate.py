"""Memory a model will need at the chosen settings, said before loading it (Qt-free).

Figures come from the GGUF header alone. Weights are memory-mapped (file-backed, so the kernel
can drop and re-read them under pressure); the KV cache is anonymous memory. The KV figure is
an upper bound: the header facts we read do not include the key/value head counts, so it
assumes one key and one value vector of the full embedding width per layer and token (f16);
grouped-query attention and sliding windows make the real cache smaller. Compute buffers
(tens of MiB on small models) are not included, and the text says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.moe.layout import ModelFacts

MIB = 1024 * 1024
KV_BYTES = 2  # f16 keys and values, llama.cpp's default cache type


@dataclass(frozen=True, slots=True)
class MemoryEstimate:
    weights_mib: float  # memory-mapped model weights
    expert_mib: float  # of which routed-expert tensors (0 for a dense model)
    kv_max_mib: float  # KV cache upper bound at n_ctx
    available_mib: float  # MemAvailable now (-1 if unknown)

    @property
    def total_mib(self) -> float:
        return self.weights_mib + self.kv_max_mib

    @property
    def fits(self) -> bool | None:
        if self.available_mib < 0:
            return None
        return self.total_mib <= self.available_mib

    def lines(self) -> list[str]:
        out = [f"weights (memory-mapped): {_mib(self.weights_mib)}"]
        if self.expert_mib > 0:
            out.append(f"  of which routed experts: {_mib(self.expert_mib)}")
        out.append(f"KV cache at this context: at most {_mib(self.kv_max_mib)}")
        out.append(f"total: about {_mib(self.total_mib)} plus compute buffers")
        if self.available_mib >= 0:
            verdict = "fits in" if self.fits else "is MORE than"
            out.append(f"this {verdict} the {_mib(self.available_mib)} of memory available now")
        return out


def estimate_memory(facts: ModelFacts, n_ctx: int, available_mib: float = -1.0) -> MemoryEstimate:
    n_layer = max(0, facts.n_layer)
    n_embd = max(0, facts.n_embd)
    kv = 2 * n_layer * n_ctx * n_embd * KV_BYTES
    return MemoryEstimate(
        weights_mib=facts.tensor_bytes / MIB,
        expert_mib=facts.expert_bytes / MIB,
        kv_max_mib=kv / MIB,
        available_mib=available_mib,
    )


def available_memory_mib() -> float:
    try:
        import psutil

        return psutil.virtual_memory().available / MIB
    except Exception:  # psutil missing or /proc unreadable: say nothing rather than guess
        return -1.0


def _mib(value: float) -> str:
    return f"{value / 1024:.2f} GiB" if value >= 1024 else f"{value:.0f} MiB"
