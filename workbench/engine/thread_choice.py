"""How many compute threads to run: the count a short measurement finds fastest (issue 38).

On a streamed model more threads stop paying early (16 cores: 8 threads beat 16 at every cache
size, reads being serial while the team waits), so the core count is a poor default. The
measurement decodes a few tokens at each candidate count, in alternating order (the cache warms
as it runs: ABAB then BABA spreads that over every candidate), and keeps the count with the
lowest median seconds per token; a tie goes to fewer threads. Nothing here times or decodes by
itself: `measure` calls the step it is given, so the choice is tested with injected timings.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from workbench.engine.metrics import UNMEASURED


@dataclass(frozen=True, slots=True)
class ThreadChoice:
    threads: int
    reason: str  # one line for the status bar, the chat summary and advise
    probe_seconds: float = UNMEASURED  # what the measurement cost (UNMEASURED: none ran)
    s_per_token: dict[int, float] = field(default_factory=dict)  # median per candidate

    def describe(self) -> str:
        """The count, its reason and what deciding it cost, for the status bar, `chat` and
        `serve`."""
        cost = (f"; measuring took {self.probe_seconds:.2f} s at open"
                if self.probe_seconds != UNMEASURED else "")
        plural = "s" if self.threads != 1 else ""
        return f"{self.threads} compute thread{plural} ({self.reason}{cost})"


# More compute threads than 4 lost speed upstream (spin-wait contention) and on the 16-core
# runs of issue 38 (8 beat 16 streamed): what `advise` recommends when nothing was measured.
RECOMMENDED_MAX = 4


def recommended(cores: int) -> int:
    """The count to run without a measurement: the cores, up to RECOMMENDED_MAX."""
    return max(1, min(cores, RECOMMENDED_MAX))


def candidates(cores: int) -> list[int]:
    """1, 2, 4, ... below the core count, and the core count itself."""
    out, n = [], 1
    while n < cores:
        out.append(n)
        n *= 2
    return [*out, max(1, cores)]


def measure(step: Callable[[int], float], counts: Sequence[int], rounds: int
            ) -> dict[int, list[float]]:
    """`step(threads)` -> seconds per token, `rounds` times for each count, alternating order."""
    samples: dict[int, list[float]] = {c: [] for c in counts}
    for r in range(rounds):
        for c in (counts if r % 2 == 0 else list(reversed(counts))):
            samples[c].append(step(c))
    return samples


def choose(samples: Mapping[int, Sequence[float]], *, probe_seconds: float = UNMEASURED
           ) -> ThreadChoice:
    """The count with the lowest median s/token (fewer threads on a tie)."""
    medians = {c: statistics.median(v) for c, v in samples.items() if v}
    if not medians:
        raise ValueError("no thread count was measured")
    best = min(medians, key=lambda c: (medians[c], c))
    ranked = " ".join(f"{c}:{1 / medians[c]:.1f}" if medians[c] > 0 else f"{c}:-"
                      for c in sorted(medians))
    return ThreadChoice(best, f"fastest measured at open (tok/s by threads {ranked})",
                        probe_seconds, medians)


def probe(step: Callable[[int], float], cores: int, rounds: int = 2) -> ThreadChoice:
    """Measure every candidate and choose; the probe's own wall time is reported."""
    started = time.perf_counter()
    samples = measure(step, candidates(cores), rounds)
    return choose(samples, probe_seconds=time.perf_counter() - started)
