"""Metrics file writer and reader: our files, upstream v1/v2 files, and the sinks around them."""

from __future__ import annotations

import math
from dataclasses import fields
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.full_disk import fill_the_disk
from workbench.atomic_write import OutputFileError
from workbench.config import Config
from workbench.engine.metric_columns import COLUMNS, UPSTREAM_COLUMNS
from workbench.engine.metrics import ModelIdentity, RunInfo, RunSummary, TokenMetrics
from workbench.engine.metrics_reader import (
    MetricsFormatError,
    column,
    parse_metrics,
    read_metrics_csv,
)
from workbench.engine.metrics_syntax import decode_value, encode_value, escape_text, unescape_text
from workbench.engine.sinks import CsvMetricsSink, FanoutSink, MemorySink, Sink
from workbench.engine.turn_settings import RECORDED_PER_TURN, TurnSettings

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures"
V1_FIXTURE = FIXTURES / "upstream" / "bmoe-v1-desktop-qwen36.csv"

TRICKY_PIECES = [
    "plain",
    "a,b",
    'say "hi"',
    "line one\nline two",
    "\r\n",
    "\n# looks like a comment",
    "日本語 🙂 é",
    "back\\slash \\n not a newline",
    "tab\there",
    "\u2028sep",
    "",
]

SETTINGS: dict[str, object] = {
    "n_threads": 4,
    "n_ctx": 4096,
    "n_ubatch": 512,
    "temp": 0.7,
    "top_k": 20,
    "top_p": 0.8,
    "seed": -1,
    "system_prompt": "You are helpful.\nAnswer in 100% plain text = no markdown.",
    "model_path": "/models/My Model Q4.gguf",
}


def make_info(settings: dict[str, object] | None = None) -> RunInfo:
    return RunInfo(
        engine_version="0.1.0",
        llama_cpp_python_version="0.3.36",
        model=ModelIdentity(
            path="/models/My Model Q4.gguf", name="My Model", size_bytes=123456789, fast_hash="ab12"
        ),
        arch="qwen3moe",
        n_layer=48,
        n_expert=128,
        n_expert_used=8,
        n_vocab=151936,
        n_ctx_train=40960,
        chat_template=True,
        settings=dict(SETTINGS if settings is None else settings),
    )


def make_token(step: int, turn: int, piece: str) -> TokenMetrics:
    # Values with no more decimals than the column format, so they read back exactly.
    return TokenMetrics(
        step=step,
        steps=64,
        turn=turn,
        wall_ms=100.25 + step,
        cpu_ms=350.5 + step,
        majflt=step * 3,
        majflt_mib=0.25 * step,
        loop_overhead_ms=0.125,
        rss_mib=2048.5,
        rss_anon_mib=512.5,
        rss_file_mib=1536.0,
        swap_mib=0.0,
        mem_available_mib=9000.5,
        mem_free_mib=4000.5,
        swap_free_mib=2047.5,
        compute_ms=100.25 + step,
        token_id=1000 + step,
        piece=piece,
        text="cumulative text is not written per row",
    )


def make_summary(turn: int, n: int) -> RunSummary:
    return RunSummary(
        turn=turn,
        n_generated=n,
        gen_seconds=0.5 * n,
        n_prompt=30 + turn,
        n_reused=12 * turn,
        n_past=100 + 50 * turn,
        n_ctx=4096,
        load_seconds=2.5,
        prefill_seconds=0.75,
        ttft_seconds=0.875,
        majflt_per_token=1.5,
        cpu_s_per_token=1.25,
        loop_overhead_s_per_token=0.002,
        stop_reason="eos" if turn == 0 else "stopped",
    )


def write_session(path: Path) -> tuple[list[TokenMetrics], list[RunSummary]]:
    tokens = [make_token(i + 1, 0, p) for i, p in enumerate(TRICKY_PIECES[:6])]
    tokens += [make_token(i + 1, 1, p) for i, p in enumerate(TRICKY_PIECES[6:])]
    summaries = [make_summary(0, 6), make_summary(1, len(TRICKY_PIECES) - 6)]
    with CsvMetricsSink(path) as sink:
        sink.on_run_info(make_info())
        for m in tokens[:6]:
            sink.on_token(m)
        sink.on_summary(summaries[0])
        for m in tokens[6:]:
            sink.on_token(m)
        sink.on_summary(summaries[1])
    return tokens, summaries


def test_round_trip_rows_field_by_field(tmp_path: Path) -> None:
    path = tmp_path / "run.csv"
    tokens, _ = write_session(path)
    mf = read_metrics_csv(path)

    assert mf.format == "bmoe_metrics v2"
    assert mf.columns == list(COLUMNS)
    assert mf.columns[: len(UPSTREAM_COLUMNS)] == list(UPSTREAM_COLUMNS)
    assert len(UPSTREAM_COLUMNS) == 29
    assert len(mf.rows) == len(tokens)
    for row, m in zip(mf.rows, tokens, strict=True):
        for name in COLUMNS:
            assert row[name] == getattr(m, name), name
        assert isinstance(row["read_bytes"], int)
        assert isinstance(row["step"], int)


def test_round_trip_summaries(tmp_path: Path) -> None:
    path = tmp_path / "run.csv"
    _, summaries = write_session(path)
    mf = read_metrics_csv(path)

    assert len(mf.summaries) == 2
    for got, s in zip(mf.summaries, summaries, strict=True):
        assert got["tokens"] == s.n_generated
        assert got["s/tok"] == pytest.approx(s.s_per_token)
        assert got["tok/s"] == pytest.approx(s.tokens_per_second)
        assert got["n_prompt"] == s.n_prompt
        assert got["load_s"] == s.load_seconds
        assert got["prefill_s"] == s.prefill_seconds
        assert got["prefill_tps"] == pytest.approx(s.prefill_tokens_per_second, abs=0.005)
        assert got["majflt/tok"] == s.majflt_per_token
        assert got["cpu_s/tok"] == s.cpu_s_per_token
        assert got["loop_overhead_s/tok"] == s.loop_overhead_s_per_token
        assert got["turn"] == s.turn
        assert got["n_reused"] == s.n_reused
        assert got["n_past"] == s.n_past
        assert got["ttft_s"] == s.ttft_seconds
        assert got["gen_s"] == s.gen_seconds
        assert got["stop_reason"] == s.stop_reason
        # Streaming did not run: every streaming key reads as the sentinel, never 0.
        for key in (
            "read_MiB",
            "io_s",
            "io_s/tok",
            "compute_s/tok",
            "stall_s/tok",
            "mgmt_s/tok",
            "cache_hit_pct",
            "cache_resident_MiB",
            "cache_budget_MiB",
            "cache_resizes",
            "token_demand_MiB",
            "layer_demand_MiB",
            "experts_routed",
            "experts_dropped",
            "evictions",
            "rereads",
        ):
            assert got[key] == -1, key


def test_round_trip_preamble(tmp_path: Path) -> None:
    path = tmp_path / "run.csv"
    write_session(path)
    lines = path.read_text(encoding="utf-8").split("\n")
    assert lines[0] == "# bmoe_metrics v2"
    assert lines[1] == "# engine=workbench-0.1.0"
    assert lines[2].startswith("# model=")
    assert lines[3].startswith("# moe_stream=0 ")
    assert lines[4].startswith("# temp=")

    mf = read_metrics_csv(path)
    p = mf.preamble
    assert p["model"] == "My Model Q4.gguf"  # the basename, space and all
    assert (p["arch"], p["n_layer"], p["n_expert"], p["n_expert_used"]) == (
        "qwen3moe",
        "48",
        "128",
        "8",
    )
    assert (p["threads"], p["n_ctx"], p["n_ubatch"], p["chatml"]) == ("4", "4096", "512", "1")
    assert (p["temp"], p["top_k"], p["top_p"], p["seed"]) == ("0.7", "20", "0.8", "4294967295")
    assert p["spec"] == "off"
    assert p["wb_version"] == "0.1.0"
    assert p["wb_llama_cpp_python"] == "0.3.36"
    assert p["wb_model_name"] == "My Model"
    assert p["wb_model_size"] == "123456789"
    assert p["wb_model_hash"] == "ab12"
    assert p["wb_n_vocab"] == "151936"
    assert mf.settings == SETTINGS


def test_streaming_keys_follow_upstream_convention(tmp_path: Path) -> None:
    off = {"moe_stream": False, "cache_mb": 5000, "io_threads": 6, "cache_floor_mb": 2048}
    on = {**off, "moe_stream": True, "dense_weights": "warm", "drop_cold_frac": 0.75}
    read: dict[str, dict[str, str]] = {}
    for name, settings in (("off", off), ("on", on)):
        path = tmp_path / f"{name}.csv"
        with CsvMetricsSink(path) as sink:
            sink.on_run_info(make_info(settings))
        read[name] = read_metrics_csv(path).preamble

    # Off: streaming knobs read 0, the raw ones are recorded as set (or upstream's default).
    assert read["off"]["moe_stream"] == "0"
    assert read["off"]["cache_mb"] == "0"
    assert read["off"]["io_threads"] == "0"
    assert read["off"]["cache_floor_mb"] == "2048"
    assert read["off"]["drop_renorm"] == "1"
    assert read["off"]["dense_weights"] == "mmap"
    # On: the settings themselves, defaults where a knob was not set.
    assert read["on"]["moe_stream"] == "1"
    assert read["on"]["cache_mb"] == "5000"
    assert read["on"]["io_threads"] == "6"
    assert read["on"]["o_direct"] == "1"
    assert read["on"]["predict_spec_max"] == "2"
    assert read["on"]["dense_weights"] == "warm"
    assert read["on"]["drop_cold_frac"] == "0.75"


def test_unmeasured_is_written_as_minus_one_never_zero(tmp_path: Path) -> None:
    path = tmp_path / "run.csv"
    m = TokenMetrics(
        step=1, steps=1, turn=0, wall_ms=5.0, cpu_ms=9.0, majflt=0, majflt_mib=0.0,
        loop_overhead_ms=0.5,
    )  # fmt: skip
    m.mem_free_mib = math.nan  # a probe that produced no number is unmeasured too
    with CsvMetricsSink(path) as sink:
        sink.on_token(m)

    text = path.read_text(encoding="utf-8")
    header, row = text.splitlines()[1:3]
    cells = dict(zip(header.split(","), row.split(","), strict=True))
    assert cells["io_ms"] == "-1.000"
    assert cells["read_bytes"] == "-1"
    assert cells["cache_hit_pct"] == "-1.00"
    assert cells["dense_resident_frac"] == "-1.000"
    assert cells["rss_mib"] == "-1.0"
    assert cells["mem_free_mib"] == "-1.0"
    assert cells["majflt"] == "0"  # measured zero stays zero

    mf = read_metrics_csv(path)
    assert mf.rows[0]["io_ms"] == -1
    assert mf.rows[0]["read_bytes"] == -1
    assert math.isnan(column(mf, "io_ms")[0])
    assert math.isnan(column(mf, "mem_free_mib")[0])
    assert column(mf, "wall_ms") == [5.0]
    assert column(mf, "majflt") == [0.0]


def test_every_row_is_one_physical_line(tmp_path: Path) -> None:
    """Upstream's bench script reads physical lines and splits on ','; our pieces must not
    break it."""
    path = tmp_path / "run.csv"
    tokens, _ = write_session(path)
    walls = []
    for line in path.read_text(encoding="utf-8").split("\n"):
        if line and not line.startswith(("#", "step,")):
            walls.append(float(line.split(",")[2]))
    assert walls == [m.wall_ms for m in tokens]


def test_reads_real_upstream_v1_file() -> None:
    # The fixture lives in shared/ beside the repository (so it is beside every CI clone too).
    assert V1_FIXTURE.exists(), f"{V1_FIXTURE} is missing: shared/ must sit beside the repository"
    mf = read_metrics_csv(V1_FIXTURE)

    assert mf.format == "bmoe_metrics v1"
    assert mf.preamble["model"] == "Qwen_Qwen3.6-35B-A3B-Q4_K_M.gguf"
    assert mf.preamble["arch"] == "qwen35moe"
    assert mf.preamble["n_expert"] == "256"
    assert mf.preamble["cache_auto"] == "1"
    assert mf.preamble["dense_weights"] == "anon"
    assert mf.settings == {}
    assert len(mf.columns) == 22
    assert len(mf.rows) == 256

    first, second = mf.rows[0], mf.rows[1]
    assert first["step"] == 1
    assert first["steps"] == 256
    assert first["wall_ms"] == 448.308
    assert first["io_ms"] == 258.963
    assert first["read_bytes"] == 126087168
    assert first["cache_hit_pct"] == 7.99
    assert first["dense_resident_frac"] == -1
    assert first["mem_available_mib"] == 1552.5
    assert second["wall_ms"] == 488.557
    assert mf.rows[-1]["step"] == 256
    # v2-only columns are absent from rows, and plot as missing.
    assert "loop_overhead_ms" not in first
    assert all(math.isnan(v) for v in column(mf, "loop_overhead_ms"))
    assert all(math.isnan(v) for v in column(mf, "dense_resident_frac"))

    (summary,) = mf.summaries
    assert summary["tokens"] == 256
    assert summary["tok/s"] == 4.783
    assert summary["read_MiB"] == 18993.1
    assert summary["cache_hit_pct"] == 84.5
    assert summary["n_prompt"] == 29
    assert summary["experts_dropped"] == 0


UPSTREAM_V2 = """\
# bmoe_metrics v2
# engine=0.19.0
# model=My Model.gguf arch=qwen35moe n_layer=40 n_expert=256 n_expert_used=6 threads=4 \
n_ctx=2048 n_ubatch=512 chatml=1
# moe_stream=1 cache_mb=3000 cache_auto=0 cache_floor_mb=1536 cache_ceil_mb=0 force_cache=0 \
load_all=0 io_threads=4 o_direct=1 overlap=1 io_two_wave=0 prefetch=0 route_ahead=0 \
predict_prefetch=0 predict_log=0 predict_spec_max=2 prefetch_sync=0 dense_weights=ahwb \
drop_cold_frac=0.75 drop_renorm=1 drop_prefill=0
# temp=0 top_k=40 top_p=0.95 seed=4294967295 compute_trace_layers=0 spec=off spec_draft_max=3 \
mtp_p_min=0 ngram_min_match=3
step,steps,wall_ms,io_ms,compute_ms,read_bytes,cache_hit_pct,stall_ms,mgmt_ms,majflt,cpu_ms,\
dense_resident_frac,turn,majflt_mib,cache_budget_mib,rss_mib,rss_anon_mib,rss_file_mib,swap_mib,\
mem_available_mib,mem_free_mib,swap_free_mib,loop_overhead_ms,mtp_batch,mtp_draft_ms,drain_ms,\
adopt_ms,ra_issue_ms,ra_wd_ms
1,2,210.500,95.250,100.000,52428800,-1.00,12.000,3.250,7,640.000,1.000,0,0.03,3000.0,4100.2,\
1200.0,2900.2,10.0,5000.0,800.0,4000.0,1.500,1,0.000,0.400,0.000,0.000,0.000
2,2,180.125,60.000,110.125,31457280,55.50,8.000,2.000,0,600.000,0.998,0,0.00,3000.0,4100.4,\
1200.0,2900.4,10.0,4990.0,790.0,4000.0,1.250,1,0.000,0.300,0.000,0.000,0.000
# summary tokens=2 s/tok=0.195 tok/s=5.122 read_MiB=80.0 io_s=0.16 compute_s/tok=0.170 \
io_s/tok=0.078 cache_hit_pct=55.5 n_prompt=20 load_s=3.000 prefill_s=1.500 prefill_tps=13.33 \
stall_s/tok=0.010 mgmt_s/tok=0.003 cache_resident_MiB=2999.0 cache_budget_MiB=3000.0 \
cache_resizes=0 spec_read_MiB=0.0 spec_experts=0 spec_useful=0 majflt/tok=3.50 cpu_s/tok=0.6200 \
token_demand_MiB=150.0 layer_demand_MiB=4.0 experts_routed=480 experts_dropped=60 \
loop_overhead_s/tok=0.0015 mtp_drafted=0 mtp_accepted=0 mtp_decodes=2 mtp_draft_s/tok=0.0000 \
drafted_steps=0 ra_committed=0 ra_passthrough=0 ra_agree_pct=-1.0 ra_gemv_ms/tok=0.000 \
ra_issue_ms/tok=0.000 ra_wd_ms/tok=0.000 drain_s/tok=0.0004 adopt_s/tok=0.0000 evictions=12 \
rereads=3
"""


def test_reads_upstream_v2_snippet(tmp_path: Path) -> None:
    path = tmp_path / "upstream.csv"
    path.write_text(UPSTREAM_V2, encoding="utf-8")
    mf = read_metrics_csv(path)

    assert mf.format == "bmoe_metrics v2"
    assert mf.preamble["engine"] == "0.19.0"
    assert mf.preamble["model"] == "My Model.gguf"  # upstream does not encode spaces
    assert mf.preamble["dense_weights"] == "ahwb"
    assert mf.preamble["drop_cold_frac"] == "0.75"
    assert mf.columns == list(UPSTREAM_COLUMNS)
    assert [r["step"] for r in mf.rows] == [1, 2]
    assert mf.rows[0]["cache_hit_pct"] == -1
    assert mf.rows[1]["cache_hit_pct"] == 55.5
    assert mf.rows[1]["wall_ms"] == 180.125
    assert mf.rows[0]["drain_ms"] == 0.4
    assert "piece" not in mf.rows[0]
    assert column(mf, "cache_hit_pct")[1] == 55.5
    assert math.isnan(column(mf, "cache_hit_pct")[0])
    (summary,) = mf.summaries
    assert summary["tok/s"] == 5.122
    assert summary["ra_agree_pct"] == -1
    assert summary["evictions"] == 12
    assert summary["rereads"] == 3


def test_columns_are_read_by_name_and_unknown_columns_kept() -> None:
    text = (
        "# bmoe_metrics v2\n"
        "wall_ms,step,future_col,note,piece\n"
        "12.500,1,7,hello,a\\nb\n"
        "13.000,2,1.5,,\n"
    )
    mf = parse_metrics(text)
    assert mf.rows[0] == {
        "wall_ms": 12.5,
        "step": 1,
        "future_col": 7,
        "note": "hello",
        "piece": "a\nb",
    }
    assert mf.rows[1] == {"wall_ms": 13.0, "step": 2, "future_col": 1.5, "note": "", "piece": ""}
    assert "io_ms" not in mf.rows[0]


def test_reads_genuine_multiline_quoted_fields() -> None:
    """A file re-saved by another CSV tool may hold real newlines inside quotes."""
    text = (
        '# bmoe_metrics v2\nstep,wall_ms,piece\n1,2.0,"one\n# two"\n2,3.0,x\n# summary tokens=2\n'
    )
    mf = parse_metrics(text)
    assert [r["piece"] for r in mf.rows] == ["one\n# two", "x"]
    assert mf.summaries == [{"tokens": 2}]


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("", 1, "empty"),
        ("hello,world\n1,2\n", 1, "not a metrics file"),
        ("# something else\n", 1, "not a metrics file"),
        ("# bmoe_metrics vX\nstep,wall_ms\n", 1, "unknown format version"),
        ("step,wall_ms\n# bmoe_metrics v2\n", 2, "first line"),
        ("# bmoe_metrics v2\n1,2,3\n", 2, "found a data row"),
        ("# bmoe_metrics v2\nstep,step\n", 2, "repeats"),
        ("# bmoe_metrics v2\nstep,,wall_ms\n", 2, "empty column name"),
        ("# bmoe_metrics v2\n# a=1\nstep,wall_ms\n1,2.0\n1,2.0,3\n", 5, "3 fields"),
        ("# bmoe_metrics v2\nstep,wall_ms\n1,2.0\n# summary tokens=1\n2,fast\n", 5, "wall_ms"),
        ('# bmoe_metrics v2\nstep,piece\n1,ok\n2,"never closed\n', 4, "bad CSV"),
        ("# bmoe_metrics v2\n# x=1\n# wb_settings={not-json\nstep\n", 3, "wb_settings"),
        ("# bmoe_metrics v2\n# wb_settings=[1,2]\nstep\n", 2, "JSON object"),
    ],
)
def test_malformed_input_names_the_line(text: str, line: int, fragment: str) -> None:
    with pytest.raises(MetricsFormatError) as info:
        parse_metrics(text, "bad.csv")
    assert info.value.line == line
    assert f"bad.csv, line {line}:" in str(info.value)
    assert fragment in str(info.value)


def test_non_utf8_file_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.csv"
    path.write_bytes(b"# bmoe_metrics v2\nstep,piece\n1,caf\xe9\n")
    with pytest.raises(MetricsFormatError, match="line 3: not UTF-8"):
        read_metrics_csv(path)


def test_tolerates_blank_lines_empty_cells_and_float_ints() -> None:
    text = "# bmoe_metrics v2\n\nstep,io_ms,wall_ms\n3.0,,2.5\n\n4,1.0,\n"
    mf = parse_metrics(text)
    assert mf.rows == [
        {"step": 3, "io_ms": -1.0, "wall_ms": 2.5},
        {"step": 4, "io_ms": 1.0, "wall_ms": -1.0},
    ]
    assert isinstance(mf.rows[0]["step"], int)


def test_header_first_file_without_preamble() -> None:
    """Upstream writes the header even without run info; such a file starts with it."""
    v2 = parse_metrics(",".join(UPSTREAM_COLUMNS) + "\n")
    v1 = parse_metrics("step,steps,wall_ms\n1,1,2.5\n")
    assert v2.format == "bmoe_metrics v2"
    assert v1.format == "bmoe_metrics v1"
    assert v1.rows == [{"step": 1, "steps": 1, "wall_ms": 2.5}]


def test_writer_does_not_flush_per_row(tmp_path: Path) -> None:
    path = tmp_path / "run.csv"
    sink = CsvMetricsSink(path)
    partial = sink.partial_path  # where the session is written until close() puts it in place
    assert partial.parent == tmp_path and partial.name.endswith(".partial")
    sink.on_run_info(make_info())
    after_info = partial.stat().st_size
    assert after_info > 0  # the preamble is on disk at once

    for step in range(1, 21):
        sink.on_token(make_token(step, 0, "word"))
    assert partial.stat().st_size == after_info

    sink.on_summary(make_summary(0, 20))
    after_summary = partial.stat().st_size
    assert after_summary > after_info
    assert len(read_metrics_csv(partial).rows) == 20  # readable while the session is open
    assert not path.exists()

    sink.on_token(make_token(1, 1, "more"))
    assert partial.stat().st_size == after_summary
    sink.close()
    sink.close()  # idempotent
    assert not partial.exists()
    assert path.stat().st_size > after_summary
    assert len(read_metrics_csv(path).rows) == 21


def test_empty_session_is_still_a_readable_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.csv"
    CsvMetricsSink(path).close()
    mf = read_metrics_csv(path)
    assert mf.format == "bmoe_metrics v2"
    assert mf.columns == list(COLUMNS)
    assert mf.rows == []
    assert mf.summaries == []


def test_turn_without_tokens_still_gets_a_header(tmp_path: Path) -> None:
    path = tmp_path / "no_tokens.csv"
    with CsvMetricsSink(path) as sink:
        sink.on_summary(make_summary(0, 0))
    mf = read_metrics_csv(path)
    assert mf.columns == list(COLUMNS)
    assert mf.summaries[0]["tokens"] == 0
    assert mf.summaries[0]["s/tok"] == -1  # no tokens: no rate, not a zero rate
    assert mf.summaries[0]["tok/s"] == -1


def test_run_info_must_come_first_and_once(tmp_path: Path) -> None:
    with CsvMetricsSink(tmp_path / "a.csv") as sink:
        sink.on_token(make_token(1, 0, "x"))
        with pytest.raises(ValueError, match="before the first token"):
            sink.on_run_info(make_info())
    with CsvMetricsSink(tmp_path / "b.csv") as sink:
        sink.on_run_info(make_info())
        with pytest.raises(ValueError, match="one session"):
            sink.on_run_info(make_info())


def test_fanout_forwards_to_every_sink(tmp_path: Path) -> None:
    first, second = MemorySink(), MemorySink()
    csv_path = tmp_path / "fan.csv"
    fan = FanoutSink(first, CsvMetricsSink(csv_path), second)
    info, token, summary = make_info(), make_token(1, 0, "hi"), make_summary(0, 1)
    fan.on_run_info(info)
    fan.on_token(token)
    fan.on_summary(summary)
    fan.close()

    for mem in (first, second):
        assert mem.run_info is info
        assert mem.tokens == [token]
        assert mem.summaries == [summary]
        assert mem.closed
    assert read_metrics_csv(csv_path).rows[0]["piece"] == "hi"


def test_fanout_keeps_going_when_a_sink_fails(tmp_path: Path) -> None:
    broken = CsvMetricsSink(tmp_path / "closed.csv")
    broken.close()  # writing to it now raises, like a sink whose disk went away
    mem = MemorySink()
    fan = FanoutSink(broken, mem)
    token = make_token(1, 0, "x")
    with pytest.raises(ValueError):
        fan.on_token(token)
    assert mem.tokens == [token]


def test_sinks_satisfy_the_protocol(tmp_path: Path) -> None:
    csv_sink = CsvMetricsSink(tmp_path / "p.csv")
    try:
        for sink in (csv_sink, MemorySink(), FanoutSink()):
            assert isinstance(sink, Sink)
    finally:
        csv_sink.close()


def test_row_columns_cover_token_metrics() -> None:
    """Every numeric TokenMetrics field has a column; only the cumulative text stays out."""
    names = {f.name for f in fields(TokenMetrics)}
    assert names - set(COLUMNS) == {"text", "reasoning"}


@given(st.text())
def test_piece_escaping_round_trips_on_one_line(text: str) -> None:
    escaped = escape_text(text)
    assert "\n" not in escaped
    assert "\r" not in escaped
    assert unescape_text(escaped) == text


@given(st.text())
def test_preamble_values_round_trip_as_one_token(text: str) -> None:
    encoded = encode_value(text)
    assert len(encoded.split()) <= 1
    assert encoded == "" or encoded.split()[0] == encoded
    assert decode_value(encoded) == text


def test_lone_surrogates_are_encoded_not_fatal() -> None:
    # From os.fsdecode of a non-UTF-8 file name: encoded as the original byte, and back.
    assert encode_value("caf\udce9") == "caf%E9"
    assert decode_value("caf%E9") == "caf\udce9"
    # Any other lone surrogate still encodes to plain ASCII instead of raising.
    assert encode_value("\ud800") == "%ED%A0%80"


@given(st.lists(st.text(), min_size=1, max_size=5))
def test_any_pieces_round_trip_through_a_file(
    tmp_path_factory: pytest.TempPathFactory, pieces: list[str]
) -> None:
    path = tmp_path_factory.mktemp("prop") / "run.csv"
    with CsvMetricsSink(path) as sink:
        for i, piece in enumerate(pieces):
            sink.on_token(make_token(i + 1, 0, piece))
    assert [r["piece"] for r in read_metrics_csv(path).rows] == pieces


def test_a_metrics_file_that_cannot_be_written_is_refused_at_once(tmp_path: Path) -> None:
    """Issue 12, case 11: `--csv` to a missing directory or a directory gave a traceback and
    left a 0-byte file. Now the sink refuses before the session starts, and writes nothing."""
    with pytest.raises(OutputFileError, match="does not exist: create it first"):
        CsvMetricsSink(tmp_path / "missing" / "run.csv")
    with pytest.raises(OutputFileError, match="is a directory"):
        CsvMetricsSink(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_ends_the_metrics_file_not_the_answer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 12, case 11: a full disk mid-session. The sink never raises on the engine thread
    (that would end the answer); the partial file goes, the earlier file stays, close() says
    what happened. ENOSPC: tests/full_disk.py (real bytes on disk, then ENOSPC)."""
    path = tmp_path / "run.csv"
    path.write_text("the earlier run\n")
    fill_the_disk(monkeypatch, budget=16_000)
    sink = CsvMetricsSink(path, buffer_bytes=4096)
    sink.on_run_info(make_info())  # the preamble fits in the budget...
    assert sink.error is None and sink.partial_path.exists()
    for step in range(1, 200):  # ...the rows do not: the buffer's flush hits the full disk
        sink.on_token(make_token(step, 0, "word " * 10))
    sink.on_summary(make_summary(0, 199))
    assert sink.error is not None
    assert not sink.partial_path.exists()
    with pytest.raises(OutputFileError) as caught:
        sink.close()
    message = str(caught.value)
    assert "metrics file" in message and "the disk is full" in message
    assert "the earlier file of that name is unchanged" in message
    assert path.read_text() == "the earlier run\n"
    assert [p.name for p in tmp_path.iterdir()] == ["run.csv"]
    sink.close()  # said once; a second close is quiet


def test_a_discarded_session_leaves_the_earlier_file(tmp_path: Path) -> None:
    path = tmp_path / "run.csv"
    path.write_text("the earlier run\n")
    sink = CsvMetricsSink(path)
    sink.on_token(make_token(1, 0, "x"))
    sink.discard()
    assert path.read_text() == "the earlier run\n"
    assert [p.name for p in tmp_path.iterdir()] == ["run.csv"]


# ---- a turn's settings on a line of their own (wb_turn_settings) -----------------------------


def turn_settings(temp: float, seed: int) -> dict[str, object]:
    """What a turn's record keeps: TurnSettings.recorded() of a session's settings, changed."""
    return TurnSettings.of(Config()).replace(temp=temp, top_p=0.8, top_k=20, seed=seed,
                                              think=True).recorded()


def test_each_turn_settings_round_trip_beside_its_summary(tmp_path: Path) -> None:
    path = tmp_path / "run.csv"
    first, second = turn_settings(0.7, 42), turn_settings(0.0, -1)
    summaries = [make_summary(0, 1), make_summary(1, 1), make_summary(2, 1)]
    summaries[0].turn_settings, summaries[2].turn_settings = first, second  # turn 1: unknown
    with CsvMetricsSink(path) as sink:
        sink.on_run_info(make_info())
        for s in summaries:
            sink.on_token(make_token(1, s.turn, "x"))
            sink.on_summary(s)
    lines = path.read_text(encoding="utf-8").splitlines()
    # Its own line, right before the summary it belongs to; a turn without settings has none.
    at = [i for i, line in enumerate(lines) if line.startswith("# wb_turn_settings=")]
    assert [lines[i + 1].startswith("# summary ") for i in at] == [True, True]
    mf = read_metrics_csv(path)
    assert mf.turn_settings == [first, {}, second]
    assert mf.turn_settings[0]["temp"] == 0.7 and mf.turn_settings[0]["seed"] == 42
    assert set(first) == set(RECORDED_PER_TURN) and "system_prompt" not in first
    # The load scope is recorded once: the per-turn line is not a preamble key.
    assert "wb_turn_settings" not in mf.preamble
    assert mf.preamble["temp"] == "0.7"  # the preamble's sampling line: the session's, as before


def test_a_file_without_turn_settings_lines_reads_as_before(tmp_path: Path) -> None:
    """Older files (and upstream's) have no such line: every summary gets {}."""
    path = tmp_path / "run.csv"
    write_session(path)
    text = path.read_text(encoding="utf-8")
    assert "wb_turn_settings" not in text
    mf = read_metrics_csv(path)
    assert mf.turn_settings == [{}, {}] and len(mf.summaries) == 2


def test_the_turn_settings_line_goes_with_the_next_summary_only() -> None:
    text = ("# bmoe_metrics v2\nstep,wall_ms\n1,5\n"
            '# wb_turn_settings={"temp":0.5}\n# summary tokens=1\n# summary tokens=1\n')
    assert parse_metrics(text).turn_settings == [{"temp": 0.5}, {}]


@pytest.mark.parametrize(("value", "fragment"), [
    ("{not json", "wb_turn_settings is not valid JSON"),
    ("[1,2]", "wb_turn_settings is not a JSON object"),
])
def test_a_misread_turn_settings_line_names_its_line(value: str, fragment: str) -> None:
    text = f"# bmoe_metrics v2\nstep,wall_ms\n1,5\n# wb_turn_settings={value}\n# summary tokens=1\n"
    with pytest.raises(MetricsFormatError) as err:
        parse_metrics(text)
    assert err.value.line == 4 and fragment in err.value.message
