"""Route trace files: what the router chose, one row per (token, layer, slot), and back.

The format follows the upstream engine's route trace (its §3.8), so the same analyses read both:

    # workbench_route_trace v1
    # model=<file> arch=<arch> n_layer=<n> n_expert=<n> n_expert_used=<k> cache_budget_bytes=<b>
    # layer=<il> expert_bytes=<one expert, all projections>   (one line per MoE layer)
    # cache_policy=<lru|lfru|layer> cache_guard=<0|1> prefetch=<0|1> preloaded=<il:e,...|->
    (the policy line is written only for a cache other than the plain cold LRU)
    turn,phase,step,layer,slot,expert,weight,residency,expert_bytes,dropped
    0,0,0,1,0,5,nan,-1,-1,0
    ...

`phase` is 0 prefill / 1 decode, `step` the context position of the token, `slot` the router
rank, `weight` the final applied router weight or `nan` where it was not read, `residency`
-1 unknown / 0 miss / 1 hit (before the load), `expert_bytes` the bytes this row made the
engine read (the entry's bytes on the first non-dropped miss of an expert in a load, 0 on other
rows, -1 where residency is unknown) and `dropped` 1 where the drop policy discarded the slot.
`cache_budget_bytes` is -1 when the run had no expert cache.

Opt-in (`chat --route-trace FILE --route-scores`), each load's rows are followed by one score
line per token: the router's full score row, as the engine's substitution read it before any
substitution (log probabilities for a softmax router; `nan` where it was not readable):

    # scores turn=0 phase=1 step=12 layer=1 row=0 values=-2.1;-0.4;...   (n_expert values)

They are comment lines, so a reader that skips `#` lines (upstream's tools, pandas) reads the
rest unchanged; `replay --substitute` needs them to predict what a margin would substitute.

The reader also takes the upstream engine's own traces as they are (`# route_trace v1`, its
§3.8): the same rows without the `dropped` column, `dense_bytes=` on each layer line and no
`cache_budget_bytes` on the model line (`TraceMeta.budget_recorded` is then False: the run had a
cache whose size the file does not say). Preamble keys and columns are read by name, in any
order; keys and columns the reader does not know are skipped. Upstream's residency 2 (the first
touch of an entry a speculative read brought in) reads as a hit: the expert was resident.

Rows are written load by load (one load = one layer's lookup for one decode token or one prefill
batch), token-major inside a load. The reader regroups them: a new load starts where the turn,
phase or layer changes, or, in decode, where the step changes. (A model with a single MoE layer
therefore reads consecutive prefill batches as one load; nothing else is ambiguous.)
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from workbench.atomic_write import AtomicFile
from workbench.file_kind import read_text
from workbench.moe.routes import Phase, Residency, RouteLoad

MAGIC = "# workbench_route_trace v1"
UPSTREAM_MAGIC = "# route_trace v1"  # the upstream engine's trace (its §3.8)
HEADER = "turn,phase,step,layer,slot,expert,weight,residency,expert_bytes,dropped"
_META_KEYS = ("model", "arch", "n_layer", "n_expert", "n_expert_used")
# Columns a row must have, by name; `expert_bytes` and `dropped` (absent upstream) are optional.
_REQUIRED_COLUMNS = ("turn", "phase", "step", "layer", "slot", "expert", "weight", "residency")
_UPSTREAM_SPECULATIVE_HIT = 2  # upstream residency: first touch of a speculatively read entry
SCORES_PREFIX = "# scores"  # a score line (opt-in): one token's full router score row


class RouteTraceError(ValueError):
    """A route trace file could not be read; the message names the line and what to do."""


@dataclass(frozen=True, slots=True)
class TraceMeta:
    """The preamble: the model, its routing shape, the cache budget of the run."""

    model: str
    arch: str
    n_layer: int
    n_expert: int
    n_expert_used: int
    cache_budget_bytes: int  # -1: the run had no expert cache
    expert_bytes: dict[int, int]  # MoE layer index -> bytes of one expert (all projections)
    # The cache's policy line (issue 24); absent in older traces, which ran the LRU.
    cache_policy: str = "lru"
    cache_guard: bool = False
    preloaded: tuple[tuple[int, int], ...] = ()  # warm start: entries read at open, in order
    prefetch: bool = False  # the previous token's experts read ahead for the next layer
    # False for an upstream trace: it records residency but not the budget the run had.
    budget_recorded: bool = True


@dataclass(frozen=True, slots=True)
class TurnLoad:
    """One layer load and the chat turn it belongs to."""

    turn: int
    load: RouteLoad


@dataclass(slots=True)
class RouteTrace:
    meta: TraceMeta
    loads: list[TurnLoad] = field(default_factory=list)

    @property
    def has_weights(self) -> bool:
        """Whether every decode slot carries a router weight (dropping what-ifs need them)."""
        decode = [t.load.weights for t in self.loads if t.load.phase is Phase.DECODE]
        return bool(decode) and all(not np.isnan(w).any() for w in decode)


# ---- writing ------------------------------------------------------------------------------------


def _fmt_weight(w: float) -> str:
    return "nan" if math.isnan(w) else f"{w:.6g}"


def _fmt_score(v: float) -> str:
    # 9 significant digits round-trip a float32 exactly, so the replay sees the engine's row.
    return "nan" if math.isnan(v) else f"{v:.9g}"


def _score_lines(turn: int, load: RouteLoad) -> list[str]:
    if load.scores is None:
        return []
    out = []
    for t in range(load.n_tokens):
        step = load.first_step + t if load.first_step >= 0 else -1
        values = ";".join(_fmt_score(float(v)) for v in load.scores[t])
        out.append(f"{SCORES_PREFIX} turn={turn} phase={int(load.phase)} step={step} "
                   f"layer={load.layer} row={t} values={values}")
    return out


def trace_lines(trace: RouteTrace) -> list[str]:
    m = trace.meta
    lines = [MAGIC,
             f"# model={m.model} arch={m.arch} n_layer={m.n_layer} n_expert={m.n_expert} "
             f"n_expert_used={m.n_expert_used} cache_budget_bytes={m.cache_budget_bytes}"]
    lines += [f"# layer={il} expert_bytes={b}" for il, b in sorted(m.expert_bytes.items())]
    if (m.cache_policy, m.cache_guard, m.prefetch, m.preloaded) != ("lru", False, False, ()):
        # Only when the cache was not the plain LRU: a default trace keeps the v1 layout.
        preloaded = ",".join(f"{il}:{e}" for il, e in m.preloaded) or "-"
        lines.append(f"# cache_policy={m.cache_policy} cache_guard={int(m.cache_guard)} "
                     f"prefetch={int(m.prefetch)} preloaded={preloaded}")
    lines.append(HEADER)
    for tl in trace.loads:
        load = tl.load
        entry = m.expert_bytes.get(load.layer, -1)
        counted: set[int] = set()
        for t in range(load.n_tokens):
            step = load.first_step + t if load.first_step >= 0 else -1
            for slot in range(load.top_k):
                e = int(load.experts[t, slot])
                res = int(load.residency[t, slot])
                dropped = bool(load.dropped[t, slot])
                if res == Residency.UNKNOWN:
                    read = -1
                elif res == Residency.MISS and not dropped and e not in counted:
                    counted.add(e)
                    read = entry
                else:
                    read = 0
                lines.append(f"{tl.turn},{int(load.phase)},{step},{load.layer},{slot},{e},"
                             f"{_fmt_weight(float(load.weights[t, slot]))},{res},{read},"
                             f"{int(dropped)}")
        lines += _score_lines(tl.turn, load)
    return lines


def write_trace(path: str | os.PathLike[str], trace: RouteTrace) -> Path:
    """Write the whole trace atomically (whole or absent); OutputFileError says why not."""
    with AtomicFile(path, "w", newline="\n") as out:
        out.write("\n".join(trace_lines(trace)) + "\n")
    return Path(path)


# ---- reading ------------------------------------------------------------------------------------


def _fields(line: str, lineno: int, where: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in line.lstrip("#").split():
        key, sep, value = part.partition("=")
        if not sep:
            raise RouteTraceError(f"{where}, line {lineno}: expected key=value pairs, found "
                                  f"{part!r}. Was the file cut or edited by hand?")
        out[key] = value
    return out


def _int(value: str, what: str, lineno: int, where: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise RouteTraceError(f"{where}, line {lineno}: {what} should be a whole number, not "
                              f"{value!r}. Was the file cut or edited by hand?") from None


def _policy_line(f: dict[str, str], lineno: int, where: str
                 ) -> tuple[str, bool, tuple[tuple[int, int], ...], bool]:
    from workbench.moe.cache_policies import POLICIES  # the policy names are declared there

    name = f.get("cache_policy", "")
    if name not in POLICIES:
        raise RouteTraceError(f"{where}, line {lineno}: cache_policy {name!r} is not one of "
                              f"{', '.join(POLICIES)}.")
    guard = _int(f.get("cache_guard", "0"), "cache_guard", lineno, where)
    entries: list[tuple[int, int]] = []
    raw = f.get("preloaded", "-")
    for item in ([] if raw == "-" else raw.split(",")):
        il, sep, e = item.partition(":")
        if not sep:
            raise RouteTraceError(f"{where}, line {lineno}: preloaded entries are layer:expert "
                                  f"pairs, found {item!r}.")
        entries.append((_int(il, "a preloaded layer", lineno, where),
                        _int(e, "a preloaded expert", lineno, where)))
    prefetch = _int(f.get("prefetch", "0"), "prefetch", lineno, where)
    return name, guard != 0, tuple(entries), prefetch != 0


class _LoadBuilder:
    """Rows of one load, token by token, each token's slots checked to run 0, 1, 2, ..."""

    def __init__(self, key: tuple[int, int, int, int]) -> None:
        self.key = key  # (turn, phase, layer, decode step or -2)
        self.tokens: list[list[tuple[int, float, int, bool]]] = []
        self.steps: list[int] = []
        self.scores: dict[int, np.ndarray] = {}  # token index in the load -> its score row

    def add_scores(self, f: dict[str, str], n_expert: int, lineno: int, where: str) -> None:
        """A score line after this load's rows: it must name this load and one of its tokens."""
        turn, phase, layer, _ = self.key
        named = tuple(_int(f.get(k, ""), k, lineno, where)
                      for k in ("turn", "phase", "step", "layer", "row"))
        row = named[4]
        if (named[0], named[1], named[3]) != (turn, phase, layer) or not (
                0 <= row < len(self.tokens)) or named[2] != self.steps[row] or row in self.scores:
            raise RouteTraceError(
                f"{where}, line {lineno}: this score line does not follow the rows of the load "
                "it names (turn, phase, step, layer, row). Was the file cut or edited by hand?")
        raw = f.get("values", "").split(";")
        try:
            values = np.array([float(v) for v in raw], dtype=np.float32)
        except ValueError:
            values = np.empty(0, dtype=np.float32)
        if len(raw) != n_expert or values.size != n_expert:
            raise RouteTraceError(f"{where}, line {lineno}: a score line holds one number (or "
                                  f"nan) per expert, {n_expert} separated by ';'.")
        self.scores[row] = values

    def add(self, step: int, slot: int, row: tuple[int, float, int, bool], lineno: int,
            where: str) -> None:
        if slot == 0:
            self.tokens.append([])
            self.steps.append(step)
        elif not self.tokens or slot != len(self.tokens[-1]):
            raise RouteTraceError(
                f"{where}, line {lineno}: slot {slot} follows slot "
                f"{len(self.tokens[-1]) - 1 if self.tokens else 'none'}; each token's slots "
                "must run 0, 1, 2, ... Was the file cut or edited by hand?")
        self.tokens[-1].append(row)

    def build(self) -> list[TurnLoad]:
        """The load, or, where its tokens route different numbers of slots, one load per run of
        equal widths (consecutive prefill batches of a model with one MoE layer read as one
        group; a load's rows are rectangular)."""
        turn, phase, layer, _ = self.key
        out: list[TurnLoad] = []
        start = 0
        for end in range(1, len(self.tokens) + 1):
            if end < len(self.tokens) and len(self.tokens[end]) == len(self.tokens[start]):
                continue
            rows = self.tokens[start:end]
            scored = [self.scores.get(t) for t in range(start, end)]
            out.append(TurnLoad(turn, RouteLoad(
                layer=layer, phase=Phase(phase), first_step=self.steps[start],
                experts=np.array([[r[0] for r in t] for t in rows], dtype=np.int32),
                weights=np.array([[r[1] for r in t] for t in rows], dtype=np.float32),
                residency=np.array([[r[2] for r in t] for t in rows], dtype=np.int8),
                dropped=np.array([[r[3] for r in t] for t in rows], dtype=np.bool_),
                # Scores only where every token of the load has its row (all or nothing).
                scores=(np.stack(scored) if all(r is not None for r in scored) else None),
            )))
            start = end
        return out


def _preamble(lines: list[str], where: str
              ) -> tuple[dict[str, str], int, dict[int, int], tuple | None, int]:
    """Every `#` line after the magic, by its keys: layer lines (`layer=`), the cache policy
    line (`cache_policy=`) and the rest merged into the run's keys (any order, later wins).
    Returns (run keys, the run line's number, expert bytes per layer, the policy line's fields
    or None, the index of the first line after the preamble)."""
    run: dict[str, str] = {}
    run_line = 2
    expert_bytes: dict[int, int] = {}
    policy = None
    i = 1
    while i < len(lines) and lines[i].startswith("#"):
        lineno = i + 1
        f = _fields(lines[i], lineno, where)
        if "layer" in f:
            if "expert_bytes" not in f:
                raise RouteTraceError(f"{where}, line {lineno}: a layer line needs "
                                      "expert_bytes=.")
            il = _int(f["layer"], "layer", lineno, where)
            expert_bytes[il] = _int(f["expert_bytes"], "expert_bytes", lineno, where)
        elif "cache_policy" in f:
            policy = _policy_line(f, lineno, where)
        else:
            if "model" in f:
                run_line = lineno
            run.update(f)
        i += 1
    return run, run_line, expert_bytes, policy, i


def _columns(line: str, lineno: int, where: str) -> dict[str, int]:
    """The header's column positions by name; the required ones must all be there."""
    names = [c.strip() for c in line.split(",")]
    missing = [c for c in _REQUIRED_COLUMNS if c not in names]
    if missing or len(set(names)) != len(names):
        raise RouteTraceError(
            f"{where}, line {lineno}: expected the column header {HEADER!r} (columns by name, "
            f"any order; {', '.join(missing) or 'a repeated name'} wrong). Was the file cut or "
            "edited by hand?")
    return {name: idx for idx, name in enumerate(names)}


def read_trace(path: str | os.PathLike[str]) -> RouteTrace:
    """Read a route trace, ours or the upstream engine's; RouteTraceError names the line of
    anything malformed."""
    p = Path(path)
    where = str(p)
    try:
        text = read_text(p, "a route trace")
    except FileNotFoundError:
        raise RouteTraceError(f"{where} does not exist: record one with `workbench chat "
                              "--route-trace FILE` or the window's Record route trace") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RouteTraceError(f"{where} could not be read as a route trace: {exc}") from None
    lines = text.splitlines()
    first = lines[0].strip() if lines else ""
    if first not in (MAGIC, UPSTREAM_MAGIC):
        raise RouteTraceError(f"{where}, line 1: not a route trace (the first line should be "
                              f"{MAGIC!r}, or upstream's {UPSTREAM_MAGIC!r}). Record one with "
                              "`workbench chat --route-trace FILE`.")
    run, run_line, expert_bytes, policy_fields, i = _preamble(lines, where)
    if "model" not in run:
        raise RouteTraceError(f"{where}, line 2: the run line (# model=... arch=...) is missing. "
                              "Was the file cut or edited by hand?")
    missing = [k for k in _META_KEYS if k not in run]
    if first == MAGIC and "cache_budget_bytes" not in run:
        missing.append("cache_budget_bytes")  # ours always records it
    if missing:
        raise RouteTraceError(f"{where}, line {run_line}: the run line lacks "
                              f"{', '.join(missing)}. Was the file cut or edited by hand?")
    if i >= len(lines):
        raise RouteTraceError(f"{where}, line {i + 1}: expected the column header {HEADER!r}. "
                              "Was the file cut or edited by hand?")
    cols = _columns(lines[i], i + 1, where)
    policy = policy_fields or ("lru", False, (), False)
    budget_recorded = "cache_budget_bytes" in run
    meta = TraceMeta(
        model=run["model"], arch=run["arch"],
        n_layer=_int(run["n_layer"], "n_layer", run_line, where),
        n_expert=_int(run["n_expert"], "n_expert", run_line, where),
        n_expert_used=_int(run["n_expert_used"], "n_expert_used", run_line, where),
        cache_budget_bytes=(_int(run["cache_budget_bytes"], "cache_budget_bytes", run_line, where)
                            if budget_recorded else -1),
        expert_bytes=expert_bytes, cache_policy=policy[0], cache_guard=policy[1],
        preloaded=policy[2], prefetch=policy[3], budget_recorded=budget_recorded,
    )
    trace = RouteTrace(meta)
    at = [cols[name] for name in _REQUIRED_COLUMNS]
    at_dropped = cols.get("dropped")
    at_bytes = cols.get("expert_bytes")
    width = len(cols)
    current: _LoadBuilder | None = None
    for idx in range(i + 1, len(lines)):
        lineno = idx + 1
        line = lines[idx]
        if not line.strip():
            continue
        if line.startswith(SCORES_PREFIX + " "):
            if current is None:
                raise RouteTraceError(f"{where}, line {lineno}: a score line before any row. "
                                      "Was the file cut or edited by hand?")
            current.add_scores(_fields(line[len(SCORES_PREFIX):], lineno, where),
                               meta.n_expert, lineno, where)
            continue
        row = line.split(",")
        if len(row) != width:
            raise RouteTraceError(f"{where}, line {lineno}: {len(row)} columns where the header "
                                  f"has {width}. Was the file cut or edited by hand?")
        turn, phase, step, layer, slot, expert = (
            _int(row[c], name, lineno, where) for c, name in
            zip(at[:6], _REQUIRED_COLUMNS[:6], strict=True))
        try:
            weight = float(row[at[6]])
        except ValueError:
            raise RouteTraceError(f"{where}, line {lineno}: weight {row[at[6]]!r} is not a "
                                  "number (nan where not read).") from None
        residency = _int(row[at[7]], "residency", lineno, where)
        if first == UPSTREAM_MAGIC and residency == _UPSTREAM_SPECULATIVE_HIT:
            residency = Residency.HIT
        dropped = 0 if at_dropped is None else _int(row[at_dropped], "dropped", lineno, where)
        if at_bytes is not None:
            _int(row[at_bytes], "expert_bytes", lineno, where)
        if phase not in (0, 1) or residency not in (-1, 0, 1) or dropped not in (0, 1):
            raise RouteTraceError(f"{where}, line {lineno}: phase must be 0/1, residency -1/0/1 "
                                  "and dropped 0/1. Was the file cut or edited by hand?")
        if layer not in expert_bytes:
            raise RouteTraceError(f"{where}, line {lineno}: layer {layer} has no `# layer=` line "
                                  "in the preamble, so its expert size is unknown.")
        if not 0 <= expert < meta.n_expert:
            raise RouteTraceError(f"{where}, line {lineno}: expert {expert} is out of range "
                                  f"(the model has {meta.n_expert}).")
        key = (turn, phase, layer, step if phase == Phase.DECODE else -2)
        if current is None or current.key != key or (slot == 0 and phase == Phase.PREFILL
                                                     and current.steps
                                                     and step <= current.steps[-1]):
            if current is not None:
                trace.loads.extend(current.build())
            current = _LoadBuilder(key)
        current.add(step, slot, (expert, weight, residency, bool(dropped)), lineno, where)
    if current is not None:
        trace.loads.extend(current.build())
    return trace
