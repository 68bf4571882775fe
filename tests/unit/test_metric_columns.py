"""The metric tables: one declaration per column and summary key, and everything that follows them
(the record classes, the writer's formats, the reader's kinds, the plots' and figures' names)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, fields
from pathlib import Path

import pytest

from workbench.bench.figures import FIGURES, per_token_unit
from workbench.engine import metric_columns as mc
from workbench.engine import summary_keys as sk
from workbench.engine.metrics import UNMEASURED, RunSummary, TokenMetrics
from workbench.engine.metrics_reader import parse_metrics, read_metrics_csv
from workbench.engine.metrics_writer import row_fields, summary_pairs
from workbench.engine.probes import MemorySample
from workbench.engine.sinks import CsvMetricsSink
from workbench.store.schema import connect, migrate
from workbench.ui.telemetry import series

V1_FIXTURE = (Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "upstream"
              / "bmoe-v1-desktop-qwen36.csv")

# Upstream's bmoe_metrics v2 header, as its writer prints it: the order positional readers use.
UPSTREAM_V2_HEADER = (
    "step,steps,wall_ms,io_ms,compute_ms,read_bytes,cache_hit_pct,stall_ms,mgmt_ms,majflt,cpu_ms,"
    "dense_resident_frac,turn,majflt_mib,cache_budget_mib,rss_mib,rss_anon_mib,rss_file_mib,"
    "swap_mib,mem_available_mib,mem_free_mib,swap_free_mib,loop_overhead_ms,mtp_batch,"
    "mtp_draft_ms,drain_ms,adopt_ms,ra_issue_ms,ra_wd_ms"
)


# -- the per-token table ----------------------------------------------------------------------

def test_every_token_metrics_field_has_exactly_one_entry() -> None:
    names = [c.name for c in mc.SPECS]
    assert len(names) == len(set(names))
    assert sorted(names) == sorted(f.name for f in fields(TokenMetrics))


def test_upstream_columns_come_first_in_upstream_order() -> None:
    assert tuple(UPSTREAM_V2_HEADER.split(",")) == mc.UPSTREAM_COLUMNS
    assert mc.COLUMNS[:29] == mc.UPSTREAM_COLUMNS
    assert (*mc.UPSTREAM_COLUMNS, *mc.EXTRA_COLUMNS) == mc.COLUMNS
    assert mc.EXTRA_COLUMNS == ("experts_routed", "experts_dropped", "drafted", "draft_len",
                                "draft_kept", "experts_reranked", "experts_substituted",
                                "grammar_ms", "token_id", "piece")


def test_upstream_v1_columns_are_a_prefix_of_v2() -> None:
    header = next(line for line in V1_FIXTURE.read_text().splitlines() if line.startswith("step"))
    v1 = tuple(header.split(","))
    assert mc.UPSTREAM_COLUMNS[:len(v1)] == v1


def test_record_only_fields_are_the_cumulative_text() -> None:
    assert mc.RECORD_ONLY == ("text", "reasoning")
    assert not set(mc.RECORD_ONLY) & set(mc.COLUMNS)


@pytest.mark.parametrize("c", mc.SPECS, ids=lambda c: c.name)
def test_declarations_read_consistently(c: mc.Column) -> None:
    assert c.unit and c.doc and c.doc == c.doc.strip() and "\n" not in c.doc
    assert not c.doc.endswith("."), "definitions are table cells: no trailing period"
    assert c.source in mc.SOURCES
    assert (c.kind == "text") == (c.unit == "text")


def test_kinds_follow_formats() -> None:
    assert {c.name for c in mc.SPECS if c.kind == "int"} == {
        "step", "steps", "read_bytes", "majflt", "turn", "mtp_batch", "token_id",
        "experts_routed", "experts_dropped", "drafted", "draft_len", "draft_kept",
        "experts_reranked", "experts_substituted"}
    assert [c.name for c in mc.FILE_SPECS if c.kind == "text"] == ["piece"]


def test_memory_sample_is_the_probe_columns() -> None:
    assert sorted(f.name for f in fields(MemorySample)) == sorted(mc.PROBE_FIELDS)
    assert mc.PROBE_FIELDS == ("rss_mib", "rss_anon_mib", "rss_file_mib", "swap_mib",
                               "mem_available_mib", "mem_free_mib", "swap_free_mib")


def test_fields_that_may_stay_unfilled_default_to_unmeasured() -> None:
    m = TokenMetrics(step=1, steps=1, turn=0, wall_ms=1.0, cpu_ms=1.0, majflt=0, majflt_mib=0.0,
                     loop_overhead_ms=0.0)
    for c in mc.SPECS:
        if c.source in ("streamer", "absent"):
            assert getattr(m, c.name) == -1, c.name


def test_check_record_names_every_drift() -> None:
    @dataclass
    class Drifted:
        step: float  # declared int
        read_bytes: int = 0  # filled by the streamer: must default to -1
        extra: int = 0  # not declared

    with pytest.raises(mc.ColumnsDrift) as info:
        mc.check_record(Drifted, ("step", "read_bytes", "wall_ms"))
    message = str(info.value)
    assert "step is float, declared int" in message
    assert "read_bytes defaults to 0" in message
    assert "no field for wall_ms" in message
    assert "extra is not a declared column" in message
    mc.check_record(TokenMetrics)  # and the real record agrees


# -- the writer and reader follow the table ---------------------------------------------------

def _distinct_token() -> TokenMetrics:
    """Every field a different value, exact in its column's format."""
    values: dict[str, object] = {}
    for i, c in enumerate(mc.SPECS):
        values[c.name] = {"int": i + 2, "float": i + 2.5, "text": f"t{i}"}[c.kind]
    return TokenMetrics(**values)


def test_writer_formats_each_column_as_declared() -> None:
    m = _distinct_token()
    cells = dict(zip(mc.COLUMNS, row_fields(m), strict=True))
    for c in mc.FILE_SPECS:
        value = getattr(m, c.name)
        assert cells[c.name] == (c.fmt % value if c.fmt else value), c.name


@pytest.mark.parametrize("c", mc.FILE_SPECS, ids=lambda c: c.name)
def test_kinds_drive_the_reader(c: mc.Column) -> None:
    mf = parse_metrics(f"# bmoe_metrics v2\n{c.name}\n7\n\n")
    (row,) = mf.rows
    value = row[c.name]
    expected = {"int": int, "float": float, "text": str}[c.kind]
    assert type(value) is expected and value == expected("7")
    if c.kind != "text":  # an empty numeric cell is unmeasured
        assert parse_metrics(f"# bmoe_metrics v2\n{c.name},other\n,1\n").rows[0][c.name] == -1


def test_undeclared_columns_are_read_by_their_looks() -> None:
    # Record-only names are not file columns: a file that has them is read like any other.
    mf = parse_metrics("# bmoe_metrics v2\nstep,text,newer\n1,7,x\n")
    assert mf.rows == [{"step": 1, "text": 7, "newer": "x"}]


def test_a_token_round_trips_column_by_column(tmp_path: Path) -> None:
    m = _distinct_token()
    with CsvMetricsSink(tmp_path / "run.csv") as sink:
        sink.on_token(m)
    (row,) = read_metrics_csv(tmp_path / "run.csv").rows
    assert row == {name: getattr(m, name) for name in mc.COLUMNS}


def test_the_store_keeps_every_column_of_the_file() -> None:
    """run_tokens is frozen migration history, so it is checked here rather than derived."""
    conn = connect(":memory:")
    migrate(conn)
    table = {r["name"]: r["type"] for r in conn.execute("PRAGMA table_info(run_tokens)")}
    table.pop("run_id")
    sql = {"int": "INTEGER", "float": "REAL", "text": "TEXT"}
    assert table == {c.name: sql[c.kind] for c in mc.FILE_SPECS}


# -- summary keys -----------------------------------------------------------------------------

def _summary() -> RunSummary:
    values = {f.name: (i + 1 if f.type == "int" else f"s{i}" if f.type == "str" else i + 0.5)
              for i, f in enumerate(fields(RunSummary))}
    return RunSummary(**values)


def test_summary_keys_are_declared_once_upstream_first() -> None:
    keys = [k.key for k in sk.KEYS]
    assert len(keys) == len(set(keys))
    upstream = [k.upstream for k in sk.KEYS]
    assert upstream == sorted(upstream, reverse=True)
    assert not set(keys) & set(sk.LEFT_OUT_UPSTREAM)


def test_every_summary_source_is_a_run_summary_attribute() -> None:
    s = _summary()
    for k in sk.KEYS:
        assert hasattr(s, k.source), k.source


def test_every_run_summary_field_is_written_or_says_why_not() -> None:
    written = {k.source for k in sk.KEYS}
    assert {f.name for f in fields(RunSummary)} - written == set(sk.NOT_WRITTEN)


def test_summary_pairs_follow_the_table() -> None:
    s = _summary()
    pairs = summary_pairs(s)
    assert [key for key, _ in pairs] == [k.key for k in sk.KEYS]
    for (_, text), k in zip(pairs, sk.KEYS, strict=True):
        value = getattr(s, k.source)
        assert text == (k.fmt % value if k.fmt else value), k.key


def test_io_seconds_is_unmeasured_when_its_per_token_figure_is() -> None:
    s = dataclasses.replace(_summary(), moe_io_s_per_token=UNMEASURED)
    assert s.moe_io_seconds == UNMEASURED
    s = dataclasses.replace(s, moe_io_s_per_token=0.25, n_generated=8)
    assert s.moe_io_seconds == 2.0


# -- the plots and compare figures read the table's names --------------------------------------

def test_plot_series_read_declared_fields_and_agree_with_their_columns() -> None:
    assert set(series.FIELDS) <= set(mc.COLUMNS)
    assert len(series.COLUMNS) == len(set(series.COLUMNS)) == len(series.SERIES)
    values = series.row_values({"wall_ms": 10.0, "cpu_ms": 20.0}.get, 3, 1)
    assert len(values) == len(series.COLUMNS)
    row = dict(zip(series.COLUMNS, values, strict=True))
    assert (row["x"], row["turn"], row["wall_ms"], row["cpu_cores"]) == (3.0, 1.0, 10.0, 2.0)
    assert math.isnan(row["io_ms"]) and math.isnan(row["read_mib"])  # -1 / absent: a gap


def test_per_token_figures_take_their_units_from_the_table() -> None:
    assert per_token_unit("wall_ms") == "ms/token"
    assert per_token_unit("majflt") == "/token"  # a count per token
    # The compare table's unit column, unchanged by where the units come from.
    assert [(f.key, f.unit) for f in FIGURES] == [
        ("tok_s", "tok/s"), ("median_ms", "ms/token"), ("p95_ms", "ms/token"),
        ("p99_ms", "ms/token"), ("ttft_s", "s"), ("read_mib", "MiB/token"), ("hit_pct", "%"),
        ("faults", "/token")]
    for f in FIGURES:
        if f.kind == "token" and f.series in mc.BY_NAME and f.reduce != "rate":
            assert f.unit == per_token_unit(f.series), f.key
