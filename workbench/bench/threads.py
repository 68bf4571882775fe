"""`bench threads`: how decode speed scales with compute threads, resident and streamed (issue 38).

For each configuration (the model resident; streamed through each expert cache budget; streamed
with no cache) one session per thread count (1, 2, 4, ... and the core count: the candidates
`engine/thread_choice.py` measures) is opened on the bench engine thread, warmed up with one
answer, then every session answers in turn, the order reversed each repeat (ABC, CBA, ...), so a
drift of the machine or of the cache falls on every count alike. A configuration's sessions are
closed before the next one opens: only one configuration's caches are in memory at a time.

Per count it prints tok/s (tokens / decode wall, the per-token bracket) with a 95 % interval
over the repeats, the decode time split into flash I/O and compute per token (the streamer's
per-token figures; compute is the whole decode when resident), and the ratio to the fastest
count, paired by repeat. It marks the count `thread_choice.choose` picks from the same samples
(the fastest median s/token, fewer threads on a tie) and the count the settings would use
by default (`n_threads`'s default), and says when that default measured slower than another.

OpenMP's wait policy is process-wide and set before llama.cpp loads (`engine/wait_policy.py`,
from the largest count measured here): the header says which one this run had, since the
scaling depends on it (issue 38's 16-core rows).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from workbench.bench.engine import close_session, on_engine, open_session
from workbench.config import Config
from workbench.engine import thread_choice, wait_policy
from workbench.engine.requests import GenerateRequest
from workbench.engine.session import Session
from workbench.moe.layout import expert_tensors

MIB = 1 << 20
PROMPT = "The threads benchmark decodes the same answer at every thread count."
Log = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Run:
    """One answer's decode: its tokens, decode wall and the wall's I/O and compute parts."""

    tokens: int
    seconds: float  # sum of the per-token decode brackets
    io_seconds: float  # the streamer's wait for expert reads (0 resident)
    compute_seconds: float  # the rest: the graph's compute (the whole decode resident)

    @property
    def s_per_token(self) -> float:
        return self.seconds / self.tokens


@dataclass(frozen=True, slots=True)
class Arrangement:
    """One configuration the bench scales: a name and the settings it changes."""

    name: str
    changes: dict[str, object]


@dataclass(frozen=True, slots=True)
class CountFigures:
    threads: int
    tok_s: float  # 1 / the median s/token over the repeats
    slowest: float  # tok/s of the slowest and the fastest repeat
    fastest: float
    io_ms_per_token: float
    compute_ms_per_token: float
    vs_chosen: float  # tok_s / the chosen count's tok_s


@dataclass(frozen=True, slots=True)
class ScalingReport:
    arrangement: str
    counts: list[CountFigures]
    chosen: int  # what thread_choice picks from these samples
    default: int  # n_threads's default on this machine

    def lines(self) -> list[str]:
        out = []
        for c in self.counts:
            marks = [m for m, hit in (("chosen", c.threads == self.chosen),
                                      ("default", c.threads == self.default)) if hit]
            out.append(
                f"  {c.threads:>3} threads  {c.tok_s:8.2f} tok/s median [{c.slowest:.2f} .. "
                f"{c.fastest:.2f}]  io {c.io_ms_per_token:7.2f} + compute "
                f"{c.compute_ms_per_token:7.2f} ms/token  vs chosen {c.vs_chosen:.3f}"
                + (f"  <- {', '.join(marks)}" if marks else ""))
        by = {c.threads: c for c in self.counts}
        verdict = "the default is the choice"
        if self.default in by and self.default != self.chosen:
            verdict = (f"the default ({self.default}) measured {by[self.default].vs_chosen:.3f}x "
                       f"of the chosen count ({self.chosen})")
        rates = " ".join(f"t{c.threads}_tok_s={c.tok_s:.2f}" for c in self.counts)
        out.append(f"threads {self.arrangement} chosen={self.chosen} default={self.default} "
                   f"{rates} ({verdict})")
        return out


def arrangements(model: Path, cache_mbs: Sequence[int]) -> list[Arrangement]:
    """Resident, streamed at each budget (0: one that holds every expert), streamed uncached."""
    total_mib = math.ceil(sum(t.n_bytes for t in expert_tensors(model)) / MIB) + 1
    out = [Arrangement("resident", {})]
    for mb in cache_mbs:
        size = mb if mb > 0 else total_mib
        label = f"streamed-cache-{size}MiB" + ("-all" if mb <= 0 else "")
        out.append(Arrangement(label, {"moe_stream": True, "cache_mb": size}))
    out.append(Arrangement("streamed-no-cache", {"moe_stream": True, "cache_mb": 0}))
    return out


def _answer(session: Session, n_tokens: int) -> Run:
    """One greedy answer on the engine thread, the way `chat` runs a turn."""
    rows = []

    def turn():
        return session.generate(GenerateRequest(text=PROMPT, n_predict=n_tokens, new_chat=True),
                                on_token=lambda event: rows.append(event.metrics))

    result = on_engine(turn)
    if not result.ok:
        raise RuntimeError(result.error)
    if not rows:
        raise RuntimeError("the answer ended before its first token (an end token at once): "
                           "no decode to time")
    wall = sum(r.wall_ms for r in rows) / 1e3
    io = sum(max(0.0, r.io_ms) for r in rows) / 1e3
    return Run(len(rows), wall, io, max(0.0, wall - io))


def figures(runs: dict[int, list[Run]], *, arrangement: str, default: int) -> ScalingReport:
    """Pure: the report from each count's repeats (every count has the same number)."""
    samples = {c: [r.s_per_token for r in rs] for c, rs in runs.items()}
    choice = thread_choice.choose(samples)
    median = choice.s_per_token  # the medians the choice compared
    counts = []
    for c, rs in sorted(runs.items()):
        tokens = sum(r.tokens for r in rs)
        counts.append(CountFigures(
            threads=c, tok_s=1 / median[c],
            slowest=1 / max(samples[c]), fastest=1 / min(samples[c]),
            io_ms_per_token=1e3 * sum(r.io_seconds for r in rs) / tokens,
            compute_ms_per_token=1e3 * sum(r.compute_seconds for r in rs) / tokens,
            vs_chosen=median[choice.threads] / median[c],
        ))
    chosen = choice.threads
    return ScalingReport(arrangement, counts, chosen, default)


def scale(model: Path, arrangement: Arrangement, counts: Sequence[int], *, repeats: int,
          n_tokens: int, log: Log) -> ScalingReport:
    base = Config(model=str(model), chat_template=False, n_ctx=max(512, n_tokens + 64),
                  n_predict=n_tokens, **arrangement.changes)
    sessions: dict[int, Session] = {}
    try:
        for c in counts:
            sessions[c] = open_session(base.replace(n_threads=c))
            _answer(sessions[c], n_tokens)  # warm-up: the pool starts, the cache fills
        runs: dict[int, list[Run]] = {c: [] for c in counts}
        for i in range(repeats):
            for c in counts if i % 2 == 0 else list(reversed(counts)):
                runs[c].append(_answer(sessions[c], n_tokens))
            log(f"{arrangement.name} {i + 1}/{repeats}: " + ", ".join(
                f"{c}t {runs[c][-1].tokens / runs[c][-1].seconds:.2f} tok/s" for c in counts))
    finally:
        for s in sessions.values():
            close_session(s)
    return figures(runs, arrangement=arrangement.name, default=Config().n_threads)


def run_threads(model: Path, *, cache_mbs: Sequence[int], counts: Sequence[int] | None,
                repeats: int, n_tokens: int, log: Log) -> list[str]:
    cores = wait_policy.usable_cores()
    counts = sorted(set(counts or thread_choice.candidates(cores)))
    in_force = wait_policy.in_force()
    lines = [f"bench threads: {cores} usable cores, counts {counts}, {repeats} x {n_tokens} "
             f"tokens per count, OpenMP "
             + (in_force.describe() if in_force is not None else "wait policy not chosen "
                "(the runtime's default)")]
    for arrangement in arrangements(model, cache_mbs):
        report = scale(model, arrangement, counts, repeats=repeats, n_tokens=n_tokens, log=log)
        lines.append(f"{arrangement.name}:")
        lines += report.lines()
    return lines
