"""Why a token was slow: the slow tokens of an answer and the causes its recorded figures show.

Qt-free and pure: it reads per-token rows by metric field name (metric_columns.py), whatever
wrote them (the store's run_tokens, our metrics file, upstream's bmoe_metrics v1/v2), and
names only what a figure shows. A token is slow when its decode wall is at least `factor` times
the answer's median (and a little more than it in absolute terms, so a 1 ms model's jitter is
not a stall). Each cause is a rule over that token's row (and the row before it), tested in
tests/unit/test_stalls.py on synthetic rows and in tests/engine/test_stall_runs.py on runs that
provoke it. Unmeasured figures (-1, an absent column, upstream's zeros where it cannot measure:
CPU time or RSS of 0 beside a non-zero wall) are never evidence either way.

The causes, in the order they are listed:

- reads: the token read more expert bytes than the answer's median (cache misses); with the
  size of one expert known, said as a number of experts.
- io: the decode waited on those reads (io_ms, or stall_ms when reads overlap compute) for a
  good part of its excess over the median.
- faults: major page faults during the decode (weights paged in from disk).
- memory: the resident set or MemAvailable fell sharply since the previous token (pages taken
  from the process or the machine short of memory).
- prefill: the first token of a turn, after a prefill (its size and time from the summary).
- verify: a decode that checked a speculative batch (the `mtp_batch` column above 1).
- contention: the decode got far fewer cores than the answer's other tokens (wall far above
  CPU time), with reads and faults not explaining it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from workbench.plain_number import fixed

MIB = 1 << 20
SLOW_FACTOR = 2.0  # wall at least this many times the answer's median...
MIN_EXCESS_MS = 1.0  # ...and at least this much above it
READ_FACTOR = 1.5  # reads well above the answer's median read
IO_SHARE = 0.25  # the wait on reads explains at least this share of the excess
MEMORY_DROP_MIB = 32.0  # a fall of RSS or MemAvailable since the previous token...
MEMORY_DROP_SHARE = 0.10  # ...and, for MemAvailable, a tenth of what was available...
MEMORY_LOW_MIB = 2048.0  # ...or what is left is this little (others' allocations on a roomy
# machine move MemAvailable by tens of MiB without pressing on anyone)
CONTENTION_SHARE = 0.6  # cores busy at most this share of the answer's median, or of the
# compute threads (an uncontended decode keeps every thread on a core, spinning if need be)
VERIFY_COLUMN = "mtp_batch"  # tokens confirmed by the decode; > 1 is a verify batch
WINDOW_LIST = 5  # slow tokens listed under an answer in the window

CAUSES = ("reads", "io", "faults", "memory", "prefill", "verify", "contention", "unexplained")


@dataclass(frozen=True, slots=True)
class Cause:
    key: str  # one of CAUSES
    text: str  # "9 experts read from disk (23 MiB)"
    figures: dict[str, float] = field(default_factory=dict)  # the numbers behind the text


@dataclass(frozen=True, slots=True)
class SlowToken:
    index: int  # 0-based position in the rows given (the answer's token index)
    turn: int
    step: int
    wall_ms: float
    causes: tuple[Cause, ...]

    def line(self, median_ms: float) -> str:
        """'token 41: 83 ms (7× median), 9 experts read from disk (23 MiB), ...'"""
        ratio = self.wall_ms / median_ms if median_ms > 0 else math.nan
        head = f"token {self.index + 1}: {_ms(self.wall_ms)}"
        if math.isfinite(ratio):
            head += f" ({fixed(ratio, '.1f')}× median)"
        return ", ".join([head, *(c.text for c in self.causes)])


@dataclass(frozen=True, slots=True)
class Prefill:
    """What the turn's summary says about the prompt read before the first token."""

    n_prompt: int  # tokens prefilled (after KV reuse)
    seconds: float  # -1: unmeasured


@dataclass(frozen=True, slots=True)
class Explanation:
    """One answer: its median wall and its slow tokens in order, each with its causes."""

    n_tokens: int
    median_ms: float  # NaN when no token has a measured wall
    threshold_ms: float
    slow: tuple[SlowToken, ...]

    def cause_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for token in self.slow:
            for cause in token.causes:
                counts[cause.key] = counts.get(cause.key, 0) + 1
        return {key: counts[key] for key in CAUSES if key in counts}

    def worst(self, n: int = WINDOW_LIST) -> list[SlowToken]:
        """The n slowest, in answer order (the window's short list)."""
        chosen = sorted(self.slow, key=lambda t: -t.wall_ms)[:n]
        return sorted(chosen, key=lambda t: t.index)


def _num(row: Mapping[str, Any], name: str) -> float:
    """A measured figure, or NaN: -1, an absent column, text and NaN all say "not measured"."""
    value = row.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan
    value = float(value)
    return value if math.isfinite(value) and value >= 0 else math.nan


def _positive(row: Mapping[str, Any], name: str) -> float:
    """For figures that cannot be 0 when measured (CPU time of a decode, a resident set):
    upstream writes 0 where it cannot measure them."""
    value = _num(row, name)
    return value if value > 0 else math.nan


def _median(values: Sequence[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return statistics.median(finite) if finite else math.nan


def _io_ms(row: Mapping[str, Any]) -> float:
    stall = _num(row, "stall_ms")
    io = _num(row, "io_ms")
    # Overlapped reads: the stall is the wait; serial reads: the read time is.
    return stall if stall > 0 or math.isnan(io) else io


def _rss(row: Mapping[str, Any]) -> float:
    rss = _positive(row, "rss_mib")
    if math.isnan(rss):
        anon, file = _positive(row, "rss_anon_mib"), _positive(row, "rss_file_mib")
        rss = anon + file if not (math.isnan(anon) or math.isnan(file)) else math.nan
    return rss


def _ms(value: float) -> str:
    return f"{fixed(value, '.0f' if value >= 10 else '.1f')} ms"


def _mib(value: float) -> str:
    if value >= 1024:
        return f"{fixed(value / 1024, '.1f')} GiB"
    return f"{fixed(value, '.0f' if value >= 10 else '.1f')} MiB"


@dataclass(frozen=True, slots=True)
class _Medians:
    wall: float
    read: float
    io: float
    majflt: float
    cores: float


def _medians(rows: Sequence[Mapping[str, Any]]) -> _Medians:
    # A row of 0 ms is a token a speculative batch confirmed (upstream bills the whole decode
    # to the batch's first row): no decode of its own, so no part of the median.
    walls = [_positive(r, "wall_ms") for r in rows]
    cores = []
    for r in rows:
        cpu, busy = _positive(r, "cpu_ms"), _busy_ms(r)
        cores.append(cpu / busy if busy > 0 else math.nan)
    return _Medians(
        wall=_median(walls), read=_median([_num(r, "read_bytes") for r in rows]),
        io=_median([_io_ms(r) for r in rows]), majflt=_median([_num(r, "majflt") for r in rows]),
        cores=_median(cores))


def _busy_ms(row: Mapping[str, Any]) -> float:
    """The decode's wall less its wait on expert reads: the time it could have used cores."""
    wall, io = _num(row, "wall_ms"), _io_ms(row)
    return wall - (0.0 if math.isnan(io) else io)


def _reads(row: Mapping[str, Any], m: _Medians, expert_bytes: float) -> Cause | None:
    read = _num(row, "read_bytes")
    if not read > 0:
        return None
    base = 0.0 if math.isnan(m.read) else m.read
    if read < READ_FACTOR * base or read <= base:
        return None
    read_mib = read / MIB
    figures = {"read_mib": read_mib, "median_read_mib": base / MIB}
    if expert_bytes > 0:
        n = max(1, round(read / expert_bytes))
        figures["experts"] = float(n)
        text = f"{n} expert{'s' * (n != 1)} read from disk ({_mib(read_mib)})"
    else:
        text = f"{_mib(read_mib)} of experts read from disk"
    return Cause("reads", text, figures)


def _io(row: Mapping[str, Any], m: _Medians, excess: float) -> Cause | None:
    io = _io_ms(row)
    if math.isnan(io) or io < MIN_EXCESS_MS:
        return None
    base = 0.0 if math.isnan(m.io) else m.io
    if io - base < IO_SHARE * excess:
        return None
    return Cause("io", f"waited {_ms(io)} on expert reads", {"io_ms": io, "median_io_ms": base})


def _faults(row: Mapping[str, Any], m: _Medians) -> Cause | None:
    majflt = _num(row, "majflt")
    if not majflt >= 1:
        return None
    base = 0.0 if math.isnan(m.majflt) else m.majflt
    if majflt <= 2 * base:
        return None
    n = int(majflt)
    figures = {"majflt": majflt}
    text = f"{n} major page fault{'s' * (n != 1)}"
    paged = _num(row, "majflt_mib")
    if paged > 0:
        figures["majflt_mib"] = paged
        text += f" (at least {_mib(paged)} paged in from disk)"
    return Cause("faults", text, figures)


def _memory(row: Mapping[str, Any], previous: Mapping[str, Any] | None) -> Cause | None:
    if previous is None:
        return None
    parts, figures = [], {}
    rss_now, rss_before = _rss(row), _rss(previous)
    if rss_before - rss_now >= MEMORY_DROP_MIB:
        figures["rss_drop_mib"] = rss_before - rss_now
        parts.append(f"resident set fell {_mib(rss_before - rss_now)}")
    avail_now = _positive(row, "mem_available_mib")
    avail_before = _positive(previous, "mem_available_mib")
    fall = avail_before - avail_now
    if fall >= MEMORY_DROP_MIB and (fall >= MEMORY_DROP_SHARE * avail_before
                                    or avail_now < MEMORY_LOW_MIB):
        figures["mem_available_drop_mib"] = avail_before - avail_now
        figures["mem_available_mib"] = avail_now
        parts.append(f"MemAvailable fell {_mib(avail_before - avail_now)} to {_mib(avail_now)}")
    if not parts:
        return None
    return Cause("memory", "memory pressure: " + " and ".join(parts), figures)


def _prefill(row: Mapping[str, Any], prefill: Prefill | None) -> Cause | None:
    if prefill is None or prefill.n_prompt <= 0 or _num(row, "step") != 1:
        return None
    text = f"first token after prefilling {prefill.n_prompt} prompt tokens"
    figures = {"n_prompt": float(prefill.n_prompt)}
    if prefill.seconds >= 0:
        figures["prefill_s"] = prefill.seconds
        text += f" ({prefill.seconds:.2f} s)"
    return Cause("prefill", text, figures)


def _verify(row: Mapping[str, Any]) -> Cause | None:
    batch = _num(row, VERIFY_COLUMN)
    if not batch > 1:
        return None
    n = int(batch)
    figures = {"batch": batch}
    text = f"a verify batch: this decode confirmed {n} tokens"
    draft = _num(row, "mtp_draft_ms")
    if draft > 0:
        figures["draft_ms"] = draft
        text += f" (drafting took {_ms(draft)})"
    return Cause("verify", text, figures)


def _contention(row: Mapping[str, Any], m: _Medians, threads: int) -> Cause | None:
    cpu, busy = _positive(row, "cpu_ms"), _busy_ms(row)
    if math.isnan(cpu) or not busy > 0:
        return None
    cores = cpu / busy
    figures = {"cores": cores, "cpu_ms": cpu, "busy_ms": busy}
    if threads > 0 and cores <= CONTENTION_SHARE * threads:
        against = f"of {threads} compute thread{'s' * (threads != 1)}"
        figures["threads"] = float(threads)
    elif m.cores > 0 and cores <= CONTENTION_SHARE * m.cores:
        against = f"against {m.cores:.2f} for this answer"
        figures["median_cores"] = m.cores
    else:
        return None
    return Cause("contention", f"CPU contention: {cores:.2f} cores busy {against} "
                               f"(CPU {_ms(cpu)} in {_ms(busy)})", figures)


def _causes(rows: Sequence[Mapping[str, Any]], i: int, m: _Medians, prefill: Prefill | None,
            expert_bytes: float, threads: int) -> list[Cause]:
    row = rows[i]
    excess = _num(row, "wall_ms") - m.wall
    causes = [c for c in (
        _reads(row, m, expert_bytes), _io(row, m, excess), _faults(row, m),
        _memory(row, rows[i - 1] if i else None), _prefill(row, prefill), _verify(row),
    ) if c is not None]
    # A decode blocked on reads or faults leaves its cores idle: that is not contention.
    if not any(c.key in ("io", "faults") for c in causes):
        contention = _contention(row, m, threads)
        if contention is not None:
            causes.append(contention)
    return causes


def explain_token(rows: Sequence[Mapping[str, Any]], index: int, *,
                  prefill: Prefill | None = None, expert_bytes: float = -1.0,
                  threads: int = -1) -> tuple[Cause, ...]:
    """What the figures show about one token against its answer, slow or not (a hover, a
    check of a provoked token); empty when nothing stands out."""
    m = _medians(rows)
    return tuple(_causes(rows, index, m, prefill, expert_bytes, threads))


def explain_answer(rows: Sequence[Mapping[str, Any]], *, prefill: Prefill | None = None,
                   expert_bytes: float = -1.0, threads: int = -1,
                   factor: float = SLOW_FACTOR) -> Explanation:
    """The slow tokens of one answer (its rows in order) and their causes.

    `expert_bytes`: one expert's size (all projections; a mean across layers), to count the
    experts a read brought in; -1 leaves the count out. `threads`: the compute threads the run
    used (-1: unknown, and contention is judged against the answer's own tokens only).
    `prefill`: the turn's, for its first token (rows of several turns: pass None, or explain
    each turn on its own).
    """
    if not factor > 1:
        raise ValueError(f"the slow factor must be above 1, not {factor!r}")
    m = _medians(rows)
    threshold = max(factor * m.wall, m.wall + MIN_EXCESS_MS) if m.wall > 0 else math.nan
    slow = []
    for i, row in enumerate(rows):
        wall = _num(row, "wall_ms")
        if not wall >= threshold:
            continue
        causes = _causes(rows, i, m, prefill, expert_bytes, threads)
        if not causes:
            causes.append(Cause("unexplained", "no recorded figure explains it"))
        step = _num(row, "step")
        turn = _num(row, "turn")
        slow.append(SlowToken(index=i, turn=-1 if math.isnan(turn) else int(turn),
                              step=-1 if math.isnan(step) else int(step), wall_ms=wall,
                              causes=tuple(causes)))
    return Explanation(n_tokens=len(rows), median_ms=m.wall, threshold_ms=threshold,
                       slow=tuple(slow))


def prefill_of(summary: Mapping[str, Any]) -> Prefill | None:
    """The prefill a summary records, under either naming: RunSummary's fields (the store) or
    the metrics file's summary keys (`n_prompt`, `prefill_s`)."""
    n = summary.get("n_prompt")
    if isinstance(n, bool) or not isinstance(n, int | float) or n <= 0:
        return None
    seconds = summary.get("prefill_seconds", summary.get("prefill_s", -1.0))
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
        seconds = -1.0
    return Prefill(int(n), float(seconds))


def mean_expert_bytes(per_layer: Mapping[int, int]) -> float:
    """One expert's size averaged over the MoE layers (layer -> one expert's bytes)."""
    sizes = [b for b in per_layer.values() if b > 0]
    return sum(sizes) / len(sizes) if sizes else -1.0
