"""Runs and compare: the compare view from metrics files (ours and upstream), the runs list over
a real Store (filters, export, import, compare), and the bench matrix launcher."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from tests.full_disk import fill_the_disk
from workbench.bench.compare import format_number
from workbench.bench.figures import FIGURES, RunFigures
from workbench.bench.stats import pearson_r
from workbench.config import Config
from workbench.engine.metrics import ModelIdentity, RunInfo, RunSummary, TokenMetrics
from workbench.engine.metrics_reader import read_metrics_csv
from workbench.engine.sinks import CsvMetricsSink
from workbench.runs.entries import LoadedRun
from workbench.ui.runs.curves import series

UPSTREAM = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "upstream" / (
    "bmoe-v1-desktop-qwen36.csv")
N = 60
GAPS = (7, 8, 30)  # tokens whose memory probe failed (-1): gaps in the curve, not dips


def info(threads: int) -> RunInfo:
    model = ModelIdentity("/models/tiny.gguf", "tiny", 123456, "abc123")
    return RunInfo("0.1.0", "0.3.36", model, "qwen3moe", 2, 4, 2, 100, 512, True,
                   Config(model=model.path, n_threads=threads, n_predict=N).to_dict())


def token(i: int, base_ms: float) -> TokenMetrics:
    wall = base_ms + (i % 7) * 0.5
    return TokenMetrics(step=i + 1, steps=N, turn=0, wall_ms=wall, cpu_ms=wall * 1.8 + (i % 3),
                        majflt=i % 4, majflt_mib=(i % 4) * 0.004, loop_overhead_ms=0.2,
                        rss_mib=-1.0 if i in GAPS else 300.0 + i, token_id=i, piece=f"t{i}")


def summary(rows: list[TokenMetrics]) -> RunSummary:
    gen = sum(r.wall_ms for r in rows) / 1e3
    return RunSummary(turn=0, n_generated=len(rows), gen_seconds=gen, n_prompt=5, n_reused=0,
                      n_past=5 + len(rows), n_ctx=512, load_seconds=0.4, prefill_seconds=0.05,
                      ttft_seconds=0.07, majflt_per_token=1.5, cpu_s_per_token=0.02,
                      loop_overhead_s_per_token=0.0002, stop_reason="length")


def write_csv(path: Path, threads: int, base_ms: float) -> Path:
    rows = [token(i, base_ms) for i in range(N)]
    with CsvMetricsSink(path) as sink:
        sink.on_run_info(info(threads))
        for row in rows:
            sink.on_token(row)
        sink.on_summary(summary(rows))
    return path


@pytest.fixture
def csvs(tmp_path: Path) -> tuple[Path, Path]:
    return write_csv(tmp_path / "two.csv", 2, 10.0), write_csv(tmp_path / "four.csv", 4, 8.0)


def loaded(path: Path, label: str) -> LoadedRun:
    return LoadedRun(label, read_metrics_csv(path), str(path))


def test_compare_view_from_our_files_and_an_upstream_one(qtbot, run, csvs):
    from workbench.ui.runs.qt_compare_view import QtCompareView

    view = QtCompareView()
    qtbot.addWidget(view)
    runs = [loaded(csvs[0], "two"), loaded(csvs[1], "four"), loaded(UPSTREAM, "upstream")]
    table = run(view.compare(runs), 60_000)

    summary = view.summary
    assert summary.rowCount() == len(FIGURES) and summary.columnCount() == 7
    headers = [summary.horizontalHeaderItem(c).text() for c in range(7)]
    assert headers == ["figure", "unit", "two", "four", "four / two", "upstream",
                       "upstream / two"]
    for i, path in enumerate((csvs[0], csvs[1], UPSTREAM)):
        rate = RunFigures.from_csv(path).estimate(FIGURES[0])
        text = summary.text_at("tok_s", 2 if i == 0 else 1 + 2 * i)
        assert text.startswith(format_number(rate)) and "[" in text, (path, text)
    ratio = summary.text_at("tok_s", 4)
    assert ratio.startswith("×") and ratio.endswith("*")  # 8 vs 10 ms a token: a difference
    assert table.cell("tok_s", 1).ratio.estimate > 1
    # Our runs had no expert cache: its hit rate is a dash, never 0.
    assert summary.text_at("hit_pct", 2) == "—" and summary.text_at("hit_pct", 3) == "—"
    ttft = RunFigures.from_csv(UPSTREAM).estimate(next(f for f in FIGURES if f.key == "ttft_s"))
    assert summary.text_at("ttft_s", 5).startswith(format_number(ttft))

    # Overlay: one curve per run on the shared token axis; the failed probes are gaps.
    view.overlay.set_metric("rss_mib")
    assert list(view.overlay.curves) == ["two", "four", "upstream"]
    x, y = view.overlay.curves["two"].getOriginalDataset()
    assert list(x[:3]) == [0.0, 1.0, 2.0] and len(y) == N
    assert all(math.isnan(y[i]) for i in GAPS)
    assert np.isfinite(np.delete(y, GAPS)).all()
    # The upstream fixture (Windows) wrote rss_mib=0.0 throughout: not measured, so no line at 0.
    _, y_up = view.overlay.curves["upstream"].getOriginalDataset()
    assert np.isnan(y_up).all()
    assert "upstream (not measured)" in [label.text for _, label in view.overlay.legend.items]
    view.overlay.set_metric("wall_ms")
    _, y_up = view.overlay.curves["upstream"].getOriginalDataset()
    assert len(y_up) == len(runs[2].metrics.rows) and np.isfinite(y_up).any()

    # Correlate: r against the pivot, in the legend.
    corr = view.correlate
    assert corr.pivot.currentData() == "wall_ms"
    mf = runs[0].metrics
    expected = pearson_r(series(mf, "cpu_ms"), series(mf, "wall_ms"))
    assert expected > 0.9
    assert f"CPU time (r = {expected:+.2f})" in corr.legend_texts()
    assert "decode wall (r = +1.00)" in corr.legend_texts()
    mem = next(c for c in corr.correlations if c.metric.key == "rss_mib")
    assert all(math.isnan(mem.normalized[i]) for i in GAPS)
    assert np.nanmin(mem.normalized) == 0.0 and np.nanmax(mem.normalized) == 1.0


def test_config_difference_is_highlighted(qtbot, run, csvs):
    from workbench.ui.runs.qt_compare_view import QtCompareView

    view = QtCompareView()
    qtbot.addWidget(view)
    run(view.compare([loaded(csvs[0], "A"), loaded(csvs[1], "B")]), 60_000)
    diff = view.config_diff
    assert diff.keys() == ["n_threads"]
    assert diff.item(0, 1).text() == "2" and diff.item(0, 2).text() == "4"
    assert diff.highlighted(0, 2) and not diff.highlighted(0, 1)


@pytest.mark.parametrize("built_under", ["light", "dark"])
def test_highlighted_cells_read_on_either_theme(qtbot, run, csvs, qapp, built_under):
    """Issue #29: the dark theme's light text on the light theme's pastel tints read at 1.2:1.
    Every tinted cell (a changed setting, a better or worse ratio) reads at >= 4.5:1, built
    under either theme and after switching to the other."""
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication, QPalette
    from PySide6.QtWidgets import QApplication

    from tests.ui.test_theme_contrast import TONE_CONTRAST, contrast
    from workbench.ui.qt_theme import apply_theme
    from workbench.ui.runs.qt_compare_view import QtCompareView

    NO_BRUSH = Qt.BrushStyle.NoBrush
    saved = QPalette(QGuiApplication.palette())
    try:
        apply_theme(built_under)
        view = QtCompareView()
        qtbot.addWidget(view)
        run(view.compare([loaded(csvs[0], "A"), loaded(csvs[1], "B")]), 60_000)
        tables = (view.summary, view.config_diff)
        tinted = [(t, t.item(r, c)) for t in tables for r in range(t.rowCount())
                  for c in range(t.columnCount())
                  if t.item(r, c) is not None and t.item(r, c).background().style() != NO_BRUSH]
        assert any(t is view.summary for t, _ in tinted)  # tok/s differs: a tinted ratio
        assert any(t is view.config_diff for t, _ in tinted)  # n_threads differs
        for theme in (built_under, "dark" if built_under == "light" else "light"):
            apply_theme(theme)
            QApplication.processEvents()
            for table, item in tinted:
                fg = item.foreground()
                # No brush of its own: the text is painted in the palette's Text colour.
                text = (fg.color() if fg.style() != NO_BRUSH
                        else table.palette().color(QPalette.ColorRole.Text))
                ratio = contrast(text, item.background().color())
                assert ratio >= TONE_CONTRAST, (theme, item.text(), round(ratio, 2))
    finally:
        qapp.setPalette(saved)


def seed_store(path: Path) -> tuple[int, int]:
    from workbench.store import Store

    with Store.open(path) as store:
        conv = store.create_conversation("Tea")
        user = store.add_message(conv.id, None, "user", "Why is tea green?")
        answer = store.add_message(conv.id, user.id, "assistant", "Leaves.")
        ids = []
        for message_id, threads, base in ((answer.id, 2, 10.0), (None, 4, 8.0)):
            rows = [token(i, base) for i in range(N)]
            r = store.create_run(info(threads), message_id=message_id)
            store.add_token_rows(r.id, rows)
            store.finish_run(r.id, summary(rows))
            ids.append(r.id)
    return ids[0], ids[1]


def test_runs_list_filters_exports_imports_and_compares(qtbot, run, tmp_path, csvs, monkeypatch):
    from workbench.ui.db_worker import AsyncStore
    from workbench.ui.runs.qt_runs_page import QtRunsPage

    chat_id, headless_id = seed_store(tmp_path / "runs.db")
    db = run(AsyncStore.open(tmp_path / "runs.db"))
    page = QtRunsPage(db.call, Config())
    qtbot.addWidget(page)
    runs_list = page.runs_list
    try:
        entries = run(page.refresh())
        assert [e.run_id for e in entries] == [headless_id, chat_id]  # newest first
        assert [e.kind for e in entries] == ["headless", "chat"]
        assert entries[0].tok_s == pytest.approx(1000 * N / sum(token(i, 8.0).wall_ms
                                                                for i in range(N)))
        assert runs_list.model_filter.findData("tiny") > 0

        runs_list.kind_filter.setCurrentIndex(runs_list.kind_filter.findData("headless"))
        run(page.tasks.wait_idle())
        assert [e.run_id for e in runs_list.model.entries] == [headless_id]
        runs_list.kind_filter.setCurrentIndex(runs_list.kind_filter.findData("all"))
        run(page.tasks.wait_idle())

        out = run(page.export_run(f"run:{chat_id}", tmp_path / "export.csv"))
        mf = read_metrics_csv(out)
        assert len(mf.rows) == N and mf.settings["n_threads"] == 2
        assert mf.summaries and mf.summaries[0]["tokens"] == N
        assert [r["rss_mib"] for r in mf.rows][GAPS[0]] == -1  # unmeasured stays -1
        assert RunFigures.from_csv(out).estimate(FIGURES[0]) == pytest.approx(entries[1].tok_s)

        # Issue 12, case 11 (a sibling): on a full disk the export is not written, the earlier
        # export stays, and the status line says why (tests/full_disk.py).
        with monkeypatch.context() as disk:
            fill_the_disk(disk, budget=100)
            assert run(page.export_run(f"run:{chat_id}", out)) is None
        assert "was not exported" in page.status.text()
        assert "the disk is full" in page.status.text()
        assert read_metrics_csv(out).rows == mf.rows
        assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]

        imported = run(page.import_csvs([str(csvs[1]), str(UPSTREAM)]))
        assert [e.kind for e in imported] == ["imported", "imported"]
        assert len(runs_list.model.entries) == 4
        runs_list.kind_filter.setCurrentIndex(runs_list.kind_filter.findData("imported"))
        run(page.tasks.wait_idle())
        assert {e.label for e in runs_list.model.entries} == {"four", UPSTREAM.stem}

        runs_list.kind_filter.setCurrentIndex(runs_list.kind_filter.findData("all"))
        run(page.tasks.wait_idle())
        runs_list.select(f"run:{chat_id}")
        runs_list.select(imported[0].key, clear=False)
        assert runs_list.compare_button.isEnabled()
        runs_list.compare_button.click()
        qtbot.waitUntil(lambda: page.compare_view.table is not None, timeout=60_000)
        run(page.tasks.wait_idle())
        labels = [a.label for a in page.compare_view.table.arms]
        assert labels == [f"#{chat_id}", "four"]
        assert page.compare_view.config_diff.keys() == ["n_threads"]
    finally:
        run(db.close())


def test_bench_matrix_arms_come_from_presets(tmp_path):
    from workbench.presets import Preset, PresetError
    from workbench.ui.runs.matrix_plan import arm_name, build_plan

    taken: set[str] = set()
    assert [arm_name(n, taken) for n in ("fast cache", "fast-cache", "_x", "ü")] == [
        "fast-cache", "fast-cache-2", "x", "preset"]
    plan = build_plan([Preset("one thread", {"n_threads": 1}), Preset("old", {"chatml": True})],
                      ["Hi"], Config(model="/m/a.gguf"), tokens=8, repeats=2, out_dir=tmp_path)
    configs = plan.configs()
    assert configs["one-thread"] == Config(model="/m/a.gguf", n_predict=8, temp=0.0,
                                           chat_template=False, n_threads=1)
    assert configs["old"].chat_template is True  # a renamed key still applies
    bad = build_plan([Preset("zero", {"n_threads": 0})], ["Hi"], Config(), out_dir=tmp_path)
    with pytest.raises(PresetError, match="n_threads is 0"):
        bad.configs()


@pytest.mark.slow
def test_bench_matrix_runs_with_progress_and_opens_in_compare(qtbot, run, tmp_path,
                                                              embedded_model_path):
    from workbench.ui.db_worker import AsyncStore
    from workbench.ui.runs.qt_runs_page import QtRunsPage

    db = run(AsyncStore.open(tmp_path / "m.db"))
    run(db.call(lambda s: (s.save_preset("one thread", {"n_threads": 1}),
                           s.save_preset("two threads", {"n_threads": 2}))))
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("# a comment\nThe lighthouse keeper opened the map and\n")
    page = QtRunsPage(db.call, Config(model=str(embedded_model_path), n_ctx=256))
    qtbot.addWidget(page)
    try:
        dialog = run(page.open_matrix_dialog())
        assert dialog.run_button.isEnabled()
        assert run(dialog.run()) is None  # nothing ticked: says so, runs nothing
        assert "tick at least one preset" in dialog.log.text()
        dialog.check("one thread")
        dialog.check("two threads")
        dialog.prompts.setText(str(prompts))
        dialog.repeats.setValue(1)
        dialog.tokens.setValue(4)
        dialog.warmup.setChecked(False)
        dialog.out_dir.setText(str(tmp_path / "matrix"))
        with qtbot.waitSignal(dialog.finished_matrix, timeout=180_000):
            result = run(dialog.run(), 180_000)
        assert dialog.progress.value() == dialog.progress.maximum() == 2
        assert [r.arm for r in result.runs] == ["one-thread", "two-threads"]
        run(page.tasks.wait_idle())
        view = page.compare_view
        assert view.table is result.table
        assert view.summary.columnCount() == 5
        assert list(view.overlay.curves) == ["one-thread r1", "two-threads r1"]
        assert view.config_diff.keys() == ["n_threads"]
        assert len(page.runs_list.model.entries) == 2  # the files joined the list
    finally:
        run(db.close())


def run_quality_kl(db, run, run_id: int) -> list[float]:
    return run(db.call(lambda s: s.get_run(run_id))).quality["series"]["kl"]


def test_the_runs_page_shows_scored_runs_quality_and_compares_it(qtbot, run, tmp_path):
    """A scored run (`workbench score`) in the list: perplexity, KL and agreement with their
    intervals beside tok/s and reads; compared, the table gains the quality rows and the view
    names the lossy setting that caused the difference."""
    from PySide6.QtCore import Qt

    from tests.unit.test_scored_runs import report
    from workbench.bench.quality import save_scored_run
    from workbench.store import Store
    from workbench.ui.db_worker import AsyncStore
    from workbench.ui.runs.qt_runs_page import QtRunsPage
    from workbench.ui.runs.qt_runs_table_model import COLUMNS

    with Store.open(tmp_path / "runs.db") as store:
        light = save_scored_run(store, report(0.1, seed=4))
        heavy = save_scored_run(store, report(1.0, seed=4, n_expert_used=1))
    db = run(AsyncStore.open(tmp_path / "runs.db"))
    page = QtRunsPage(db.call, Config())
    qtbot.addWidget(page)
    try:
        run(page.refresh())
        model = page.runs_list.model
        keys = [k for k, _ in COLUMNS]
        row = model.row_of(f"run:{heavy}")
        kl = model.index(row, keys.index("kl_mean")).data()
        assert "[" in kl and float(kl.split()[0]) > 0  # an estimate with its interval
        assert model.index(row, keys.index("read_mib")).data() == "1.00"
        assert "positions scored" in model.index(row, keys.index("kl_mean")).data(
            Qt.ItemDataRole.ToolTipRole)
        table = run(page.compare([f"run:{light}", f"run:{heavy}"]))
        assert table is not None and table.row("kl_mean").cells[1].ratio.estimate > 1
        view = page.compare_view
        assert "n_expert_used (lossy)" in [view.config_diff.item(r, 0).text()
                                           for r in range(view.config_diff.rowCount())]
        assert "n_expert_used" in view.cause.text() and not view.cause.isHidden()
        assert view.summary.text_at("agree_pct", 2) != "—"
        # The per-position KL lane: brushed, it says what the stretch cost and which text.
        overlay = view.overlay
        assert overlay.metric_box.findData("kl") >= 0 and overlay.worst_button.isEnabled()
        found = overlay.select_worst()
        assert overlay.metric_key == "kl" and overlay.region is not None
        kl = np.asarray(run_quality_kl(db, run, light))
        first, last = found[0].first, found[0].last
        assert last - first + 1 == 16 and found[0].kl_mean == pytest.approx(
            kl[first:last + 1].mean())
        assert found[0].kl_mean >= kl.mean()  # the worst stretch is at least average
        assert f"w{first} w{first + 1}" in overlay.readout.text()
        assert "KL mean" in overlay.readout.text() and not overlay.readout.isHidden()
        brushed = overlay.select_span(2.2, 5.8)  # Shift+drag reports x; whole positions 3..5
        assert [(s.first, s.last) for s in brushed] == [(3, 5), (3, 5)]
        overlay.clear_span()
        assert overlay.readout.isHidden() and overlay.region is None
    finally:
        run(db.close())
