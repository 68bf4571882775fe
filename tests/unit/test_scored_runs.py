"""A scored run is a run: the store keeps its quality figures (an older file opens and keeps its
data), `runs list` and the Runs list show perplexity, KL and agreement beside tok/s and reads,
and the compare table adds them with intervals and says which setting caused the difference.
No model: the reports are built from synthetic logits, as a scorer would build them."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from workbench.bench.compare import RunGroup, compare_arms, format_table
from workbench.bench.figures import RunFigures
from workbench.bench.quality import ArmRun, QualityReport, save_scored_run
from workbench.bench.quality_cost import QualityCost
from workbench.bench.quality_stats import SeriesBuilder, figures, log_softmax
from workbench.cli.main import main
from workbench.engine.metrics import ModelIdentity, RunInfo
from workbench.engine.scoring import ForcedRun
from workbench.runs.entries import entry_from_run
from workbench.runs.run_csv import run_metrics
from workbench.store import Store
from workbench.store.schema import MIGRATIONS, connect, migrate

VOCAB, N = 40, 60


def _info(**settings: object) -> RunInfo:
    return RunInfo(engine_version="0.1.0", llama_cpp_python_version="0.3.36",
                   model=ModelIdentity("/m/tiny.gguf", "tiny", 1234, "h1"), arch="qwen3moe",
                   n_layer=2, n_expert=8, n_expert_used=2, n_vocab=VOCAB, n_ctx_train=512,
                   chat_template=False,
                   settings={"moe_stream": True, "cache_mb": 2, "n_expert_used": 0,
                             "drop_cold_frac": 0.0, **settings})


def report(noise: float, seed: int = 0, **settings: object) -> QualityReport:
    """A comparison whose setting's logits are the reference's plus `noise` (0: lossless)."""
    rng = np.random.default_rng(seed)
    builder = SeriesBuilder()
    for _ in range(N):
        ref = rng.normal(size=VOCAB)
        builder.add(int(rng.integers(VOCAB)), log_softmax(ref),
                    log_softmax(ref + noise * rng.normal(size=VOCAB)))
    series = builder.build()
    forced = ForcedRun(n_positions=N, decodes=N, decode_ms=list(rng.uniform(2, 3, N)),
                       position_read_bytes=[1 << 20] * N, read_bytes=N << 20, hit_rate=50.0)
    ref_run = ForcedRun(n_positions=N, decodes=N, decode_ms=list(rng.uniform(4, 5, N)))
    return QualityReport(
        text_name="t.txt", n_text_tokens=N + 1, n_scored=N, notes=[],
        mode="one token per decode", setting=ArmRun("setting", dict(settings), forced),
        reference=ArmRun("reference", {}, ref_run), series=series, figures=figures(series),
        info=_info(**settings), n_ctx=256, pieces=[f" w{i}" for i in range(N)])


def test_a_scored_run_keeps_its_figures_rows_and_summary(tmp_path: Path):
    rep = report(0.5, n_expert_used=1)
    with Store.open(tmp_path / "w.db") as store:
        run_id = save_scored_run(store, rep)
        run = store.get_run(run_id)
        rows = store.token_rows(run_id)
    assert run.scored and run.message_id is None and run.label == "score"
    assert run.n_token_rows == N and [r["wall_ms"] for r in rows] == rep.setting.forced.decode_ms
    assert all(r["read_bytes"] == 1 << 20 for r in rows)
    assert all(r["cpu_ms"] == -1 for r in rows)  # not probed: unmeasured, never 0
    assert [r["piece"] for r in rows[:2]] == [" w0", " w1"]  # the text each position predicts
    cost = QualityCost.from_record(run.quality)
    assert cost is not None and cost.n_positions == N
    assert cost.kl_mean.estimate == pytest.approx(rep.figures.kl_mean.estimate)
    assert cost.kl_mean.low <= cost.kl_mean.estimate <= cost.kl_mean.high
    assert cost.speedup == pytest.approx(rep.speedup) and cost.speedup > 1
    entry = entry_from_run(run)
    assert entry.tok_s == pytest.approx(run.run_summary().tokens_per_second)
    assert entry.read_mib == pytest.approx(1.0) and entry.cost is not None
    assert "KL" in cost.summary() and "faster" in cost.summary()


def test_an_old_store_opens_keeps_its_runs_and_takes_scored_runs(tmp_path: Path):
    path = tmp_path / "old.db"
    conn = connect(path)
    migrate(conn, MIGRATIONS[:7])  # the schema before quality was kept
    conn.execute("INSERT INTO runs (created_at, label, settings, summary) VALUES (1, 'old',"
                 " '{\"n_ctx\": 256}', '{}')")
    conn.close()
    with Store.open(path) as store:
        old = store.list_runs()
        assert [r.label for r in old] == ["old"] and old[0].settings == {"n_ctx": 256}
        assert old[0].quality == {} and not old[0].scored
        assert entry_from_run(old[0]).cost is None
        new_id = save_scored_run(store, report(0.3))
        assert store.get_run(new_id).scored
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)


def _figures(store: Store, run_id: int) -> RunFigures:
    run = store.get_run(run_id)
    return RunFigures.from_metrics(run_metrics(run, store.token_rows(run_id)),
                                   label=f"#{run_id}", quality=run.quality)


def test_the_compare_table_adds_quality_with_intervals_and_names_the_lossy_cause(
        tmp_path: Path):
    with Store.open(tmp_path / "w.db") as store:
        light = save_scored_run(store, report(0.1, seed=1, n_expert_used=0))
        heavy = save_scored_run(store, report(1.0, seed=1, n_expert_used=1, cache_mb=4))
        arms = [RunGroup(f"#{i}", [_figures(store, i)]) for i in (light, heavy)]
    table = compare_arms(arms, resamples=300)
    kl = table.row("kl_mean")
    assert kl.cells[1].value.estimate > kl.cells[0].value.estimate > 0
    assert kl.cells[0].value.low < kl.cells[0].value.estimate < kl.cells[0].value.high
    assert kl.cells[1].ratio.estimate > 1 and kl.cells[1].ratio.excludes(1.0)
    assert table.row("agree_pct").cells[1].value.estimate < 100
    assert table.row("ppl").cells[0].value.estimate > 1
    assert {d.key: d.lossy for d in table.config_diff} == {"n_expert_used": True,
                                                           "cache_mb": False}
    assert "n_expert_used, the only lossy setting" in table.quality_cause
    text = format_table(table)
    assert "n_expert_used (lossy)" in text and "KL mean" in text


def test_runs_that_were_not_scored_show_no_quality_rows(tmp_path: Path):
    with Store.open(tmp_path / "w.db") as store:
        a, b = (save_scored_run(store, report(0.2, seed=s)) for s in (1, 2))
        for i in (a, b):
            store.set_quality(i, {})
        arms = [RunGroup(f"#{i}", [_figures(store, i)]) for i in (a, b)]
    table = compare_arms(arms, resamples=100)
    assert not any(r.figure.key == "kl_mean" for r in table.rows)
    assert table.quality_cause == ""


def test_runs_list_and_compare_from_the_command_line(tmp_path: Path, capsys):
    db = tmp_path / "w.db"
    with Store.open(db) as store:
        a = save_scored_run(store, report(0.1, seed=3))
        b = save_scored_run(store, report(0.8, seed=3, drop_cold_frac=0.5))
    assert main(["runs", "list", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "KL nats" in out and "agree %" in out and "scored runs" in out
    assert main(["runs", "list", "--db", str(db), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert all(r["quality"]["kl_mean"]["estimate"] > 0 for r in listed)
    assert main(["runs", "compare", str(a), str(b), "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "drop_cold_frac (lossy)" in out and "comes from drop_cold_frac" in out
    assert main(["runs", "show", str(b), "--db", str(db)]) == 0
    assert "quality (t.txt" in capsys.readouterr().out


def test_a_damaged_quality_record_reads_as_not_scored():
    from workbench.bench.figures import quality_series

    for damaged in ({"series": "nonsense"}, {"series": {"kl": ["a", "b"]}}, {"series": None},
                    {"figures": "x"}, None):
        assert all(v.size == 0 for v in quality_series(damaged).values())
    cost = QualityCost.from_record({"figures": {"kl_mean": "x"}})
    assert cost is not None and math.isnan(cost.kl_mean.estimate)  # unmeasured, never 0
    assert QualityCost.from_record({"figures": "x"}) is None
