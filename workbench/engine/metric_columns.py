"""Every per-token figure, declared once: the record, the metrics file and its docs follow it.

Each `Column` names one `TokenMetrics` field with its unit, its CSV number format, whether the
upstream engine's ``bmoe_metrics v2`` has it, who fills it (and so what a -1 in it means) and
its definition. `SPECS` holds them in file order: the 29 upstream columns in upstream order
(positional upstream readers keep working), then ours, then the fields that stay in the record
and are never written. From `SPECS` come the CSV header and number formats
(metrics_writer.py), the reader's column kinds (metrics_reader.py), the column table of
docs/telemetry.md (metric_docs.py) and the names the plots and compare figures read.

`TokenMetrics` and `MemorySample` spell their fields out (slots dataclasses, fast and typed on
the engine thread); `check_record` fails at their import if either drifts from this table, as
workbench/config.py does for `Config`. Adding a column is one `Column(...)` entry plus one field
line (and a store migration for its run_tokens column, which a test compares with this table),
then:  python -m workbench.engine.metric_docs --write
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal, get_args

Kind = Literal["int", "float", "text"]
# Who fills a field, which says what a -1 in it means:
#   loop      the decode loop, around or after every decode: -1 only where the platform cannot
#             report the figure
#   probe     the memory probe after every decode (MemorySample): as for loop
#   streamer  the expert streamer: -1 while expert streaming is off
#   absent    an upstream feature this engine does not have: always -1
Source = Literal["loop", "probe", "streamer", "absent"]
SOURCES: tuple[Source, ...] = get_args(Source)

# Upstream's number formats (its writer's printf strings), named by what they format.
_INT = "%d"
_MS = "%.3f"
_MIB = "%.1f"
# The memory probes' columns are re-read at most this often (engine/probes.py): a token's figures
# are at most this old. 200 ms is one live-plot frame at the 5 Hz the window keeps while the
# engine takes every core (issue 39), so no frame shows a figure older than the one before it.
MEMORY_MAX_AGE_MS = 200
_FRESH = f"read after a decode, <= {MEMORY_MAX_AGE_MS} ms old"
_TEXT = ""  # text is escaped (metrics_syntax.escape_text), not printf-formatted


@dataclass(frozen=True, slots=True)
class Column:
    """One per-token figure: a TokenMetrics field and, unless `in_file` is False, a column."""

    name: str  # the TokenMetrics field and the CSV column
    fmt: str  # printf format of the CSV cell: "%d" for integers, "" for text
    unit: str  # what the docs print: "ms", "MiB", "bytes", "count", "%", "index"...
    source: Source
    doc: str  # the definition, one line of Markdown
    upstream: bool = True  # upstream's bmoe_metrics v2 has this column
    note: str = ""  # qualifies `source` in the docs: "-1 with no cache", "1" (a constant)
    in_file: bool = True  # False: record only (the cumulative text would make files quadratic)

    @property
    def kind(self) -> Kind:
        """How the reader types the column, read off the format so the two cannot disagree."""
        if self.fmt == _TEXT:
            return "text"
        return "int" if self.fmt == _INT else "float"


SPECS: tuple[Column, ...] = (
    # The 29 upstream columns, in upstream's order.
    Column("step", _INT, "index", "loop", "1-based index of the token within its turn"),
    Column("steps", _INT, "tokens", "loop",
           "tokens the turn was asked to generate (the target, not the outcome)"),
    Column("wall_ms", _MS, "ms", "loop",
           "wall time of the `llama_decode` call that produced the token, and nothing else"),
    Column("io_ms", _MS, "ms", "streamer",
           "part of `wall_ms` spent blocked on expert reads (serial streaming)"),
    Column("compute_ms", _MS, "ms", "loop",
           "`wall_ms − io_ms − mgmt_ms`, clamped at 0: a residual, not a measurement. Equal "
           "to `wall_ms` when streaming is off"),
    Column("read_bytes", _INT, "bytes", "streamer",
           "expert bytes read from the model file for this token (aligned windows when "
           "O_DIRECT)"),
    Column("cache_hit_pct", "%.2f", "%", "streamer",
           "expert-cache hits / lookups × 100, **cumulative** since the cache was created "
           "(all turns, prefill included); rises under dropping without the cache serving "
           "more", note="-1 with no cache"),
    Column("stall_ms", _MS, "ms", "absent",
           "overlap mode only: compute threads' time blocked on expert reads, per thread",
           note="serial streaming only"),
    Column("mgmt_ms", _MS, "ms", "streamer",
           "expert-cache bookkeeping: lookups, LRU, eviction (the dense-residency probe runs "
           "outside the decode, in `loop_overhead_ms`)"),
    Column("majflt", _INT, "count", "loop", "major page faults of the process during the decode"),
    Column("cpu_ms", _MS, "ms", "loop", "process CPU time (all threads) during the decode"),
    Column("dense_resident_frac", "%.3f", "0..1", "streamer",
           "fraction of the non-expert weights resident in RAM at the last sample"),
    Column("turn", _INT, "index", "loop", "0-based index of the turn in the session"),
    Column("majflt_mib", "%.2f", "MiB", "loop",
           "`majflt × page size`: a floor, since kernels fault in clusters"),
    Column("cache_budget_mib", _MIB, "MiB", "streamer", "expert-cache budget in force",
           note="-1 with no cache"),
    Column("rss_mib", _MIB, "MiB", "probe",
           f"process resident set, {_FRESH}"),
    Column("rss_anon_mib", _MIB, "MiB", "probe",
           f"anonymous part of the resident set, {_FRESH}"),
    Column("rss_file_mib", _MIB, "MiB", "probe",
           f"file-backed part of the resident set, {_FRESH}"),
    Column("swap_mib", _MIB, "MiB", "probe",
           f"process memory swapped out, {_FRESH}"),
    Column("mem_available_mib", _MIB, "MiB", "probe",
           f"system memory available (`MemAvailable`), {_FRESH}"),
    Column("mem_free_mib", _MIB, "MiB", "probe",
           f"system memory free (`MemFree`), {_FRESH}"),
    Column("swap_free_mib", _MIB, "MiB", "probe", f"free swap, {_FRESH}"),
    Column("loop_overhead_ms", _MS, "ms", "loop",
           "from the end of the previous decode (first token: end of prefill) to the start "
           "of this one: sampling, detokenizing, parsing, sinks"),
    Column("mtp_batch", _INT, "tokens", "loop",
           "tokens confirmed by the decode that produced the row (every row of a speculative "
           "verify step has its count); 1 without speculation", note="1 without speculation"),
    Column("mtp_draft_ms", _MS, "ms", "loop",
           "drafting time of the step that produced the row (first row of the step, 0 on the "
           "rest): part of `loop_overhead_ms`", note="-1 while speculation is off"),
    Column("drain_ms", _MS, "ms", "absent",
           "upstream overlap: wait for the previous layer's reads (inside compute)"),
    Column("adopt_ms", _MS, "ms", "absent",
           "upstream route-ahead: wait for its own early reads (inside mgmt)"),
    Column("ra_issue_ms", _MS, "ms", "absent", "upstream route-ahead issue cost"),
    Column("ra_wd_ms", _MS, "ms", "absent", "upstream route-ahead watchdog cost"),
    # Ours, appended after the upstream ones. Text columns come last (metrics_writer.py).
    Column("experts_routed", _INT, "count", "streamer",
           "routed slots (token × top-k, every layer) of this decode: what the router selected, "
           "counted while dropping is on", upstream=False, note="-1 while dropping is off"),
    Column("experts_dropped", _INT, "count", "streamer",
           "of those, slots dropped: a cache miss weighted below `drop_cold_frac / top-k` "
           "(the graph's top-k), "
           "never a token's top expert", upstream=False, note="-1 while dropping is off"),
    Column("drafted", _INT, "0/1", "loop",
           "1: the token was drafted and verification kept it; 0: the model picked it itself "
           "(a plain decode, or the pick that ends a verify step)", upstream=False,
           note="-1 while speculation is off"),
    Column("draft_len", _INT, "tokens", "loop",
           "tokens drafted by the decode that produced the row (every row of a verify step has "
           "it, as `mtp_batch`; 0 on a plain decode)", upstream=False,
           note="-1 while speculation is off"),
    Column("draft_kept", _INT, "tokens", "loop",
           "of those, tokens verification kept (placed as `draft_len`): `mtp_batch − 1`",
           upstream=False, note="-1 while speculation is off"),
    Column("experts_reranked", _INT, "count", "streamer",
           "slots (token × top-k, every layer) whose routing substitution examined in this "
           "decode: resident experts' scores raised by `expert_substitute × (max − min)`, the "
           "top-k taken again", upstream=False, note="-1 while substitution is off"),
    Column("experts_substituted", _INT, "count", "streamer",
           "of those, experts substitution brought into a token's set in place of the router's "
           "(a cached expert for an uncached one; a reorder counts 0)", upstream=False,
           note="-1 while substitution is off"),
    Column("grammar_ms", _MS, "ms", "loop",
           "a grammar's mask and accept for this token's pick (structured output, a tool "
           "call's arguments): part of `loop_overhead_ms`, never of `wall_ms`", upstream=False,
           note="-1 without a grammar"),
    Column("token_id", _INT, "id", "loop", "vocabulary id of the token", upstream=False),
    Column("piece", _TEXT, "text", "loop", "the token's text, escaped as below", upstream=False),
    # In the record only: the parsed answer and reasoning so far, which the window shows.
    Column("text", _TEXT, "text", "loop", "the answer so far, without the reasoning",
           upstream=False, in_file=False),
    Column("reasoning", _TEXT, "text", "loop", "the reasoning so far", upstream=False,
           in_file=False),
)

BY_NAME: dict[str, Column] = {c.name: c for c in SPECS}
FILE_SPECS: tuple[Column, ...] = tuple(c for c in SPECS if c.in_file)
COLUMNS: tuple[str, ...] = tuple(c.name for c in FILE_SPECS)  # the CSV header
UPSTREAM_COLUMNS: tuple[str, ...] = tuple(c.name for c in FILE_SPECS if c.upstream)
EXTRA_COLUMNS: tuple[str, ...] = tuple(c.name for c in FILE_SPECS if not c.upstream)
RECORD_ONLY: tuple[str, ...] = tuple(c.name for c in SPECS if not c.in_file)
KINDS: dict[str, Kind] = {c.name: c.kind for c in FILE_SPECS}  # how the reader types a column
PROBE_FIELDS: tuple[str, ...] = tuple(c.name for c in SPECS if c.source == "probe")


class ColumnsDrift(TypeError):
    """A record class or the table itself no longer matches the declarations."""


def _check_table(specs: tuple[Column, ...]) -> None:
    names = [c.name for c in specs]
    if len(set(names)) != len(names):
        raise ColumnsDrift("a column is declared twice")
    in_file = [c.in_file for c in specs]
    if in_file != sorted(in_file, reverse=True):
        raise ColumnsDrift("record-only fields must come after every column of the file")
    upstream = [c.upstream for c in specs if c.in_file]
    if upstream != sorted(upstream, reverse=True):
        raise ColumnsDrift("our columns must come after the upstream ones")
    for c in specs:
        if c.fmt != _TEXT and not (c.fmt == _INT or (c.fmt.startswith("%.") and c.fmt[-1] in "fg")):
            raise ColumnsDrift(f"{c.name}: format {c.fmt!r} is not %d, %.Nf or text")


_check_table(SPECS)

_PY_TYPES: dict[Kind, str] = {"int": "int", "float": "float", "text": "str"}
_UNFILLED = ("streamer", "absent")  # may stay unfilled: the record's default must say so


def check_record(cls: type, names: tuple[str, ...] | None = None) -> None:
    """Raise ColumnsDrift unless the dataclass `cls` has one field per declared name (all of
    SPECS by default), of the declared kind, and a field that may stay unfilled defaults to -1
    (unmeasured), never 0. Field order is free: dataclass defaults force their own."""
    want = {n: BY_NAME[n] for n in (names if names is not None else BY_NAME)}
    have = {f.name: f for f in dataclasses.fields(cls)}
    problems = [f"no field for {n}" for n in want if n not in have]
    problems += [f"{n} is not a declared column" for n in have if n not in want]
    for name in want.keys() & have.keys():
        spec, f = want[name], have[name]
        annotation = getattr(f.type, "__name__", f.type)
        if annotation != _PY_TYPES[spec.kind]:
            problems.append(f"{name} is {annotation}, declared {spec.kind}")
        if spec.source in _UNFILLED and f.default != -1:
            problems.append(f"{name} defaults to {f.default!r}; unfilled must read -1")
    if problems:
        raise ColumnsDrift(f"{cls.__name__} drifted from metric_columns.SPECS: "
                           + "; ".join(sorted(problems)))
