"""The stall explainer in the real window: the short list under an answer, markers on the plots,
and a click on a listed token selecting it on every plot and in the answer."""

from __future__ import annotations

from tests.ui.user_actions import WAIT, send

MIB = 1 << 20


def _store_answer_with_a_slow_token(n: int = 30, slow: int = 17) -> int:
    """A conversation whose answer's run has one slow token (20 MiB read, 60 ms waiting on it),
    written through the real store where the window will find it; returns its id."""
    from workbench.engine.metrics import ModelIdentity, RunInfo, RunSummary, TokenMetrics
    from workbench.store import MessageStats, Store, default_path

    info = RunInfo(engine_version="0.1.0", llama_cpp_python_version="0.3.36",
                   model=ModelIdentity("/m/none.gguf", "none", 1, "h"), arch="qwen3moe",
                   n_layer=2, n_expert=8, n_expert_used=2, n_vocab=100, n_ctx_train=512,
                   chat_template=True, settings={"n_threads": 2})
    rows = [TokenMetrics(step=i + 1, steps=n, turn=0, wall_ms=90.0 if i == slow else 10.0,
                         cpu_ms=30.0 if i == slow else 20.0, majflt=0, majflt_mib=0.0,
                         loop_overhead_ms=0.1, io_ms=60.0 if i == slow else 0.5,
                         read_bytes=20 * MIB if i == slow else MIB, piece=f" w{i}")
            for i in range(n)]
    summary = RunSummary(turn=0, n_generated=n, gen_seconds=0.38, n_prompt=12, n_reused=0,
                         n_past=42, n_ctx=512, load_seconds=0.5, prefill_seconds=0.05,
                         ttft_seconds=0.06, majflt_per_token=0.0, cpu_s_per_token=0.02,
                         loop_overhead_s_per_token=0.001, stop_reason="length")
    path = default_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with Store.open(path) as store:
        conv = store.create_conversation("Slow one")
        q = store.add_message(conv.id, None, "user", "Go.")
        run = store.create_run(info, summary=summary)
        store.add_token_rows(run.id, rows)
        a = store.add_message(conv.id, q.id, "assistant", "".join(r.piece for r in rows),
                              stats=MessageStats(run_id=run.id, x_start=0))
        store.attach_run(run.id, a.id)
        return conv.id


def _open(qtbot, window, cid) -> None:
    done = window.stalls.explained
    task = window.tasks.spawn(window.chat.open_conversation(cid))
    qtbot.waitUntil(task.done, timeout=WAIT)
    if cid is not None:
        qtbot.waitUntil(lambda: window.stalls.explained > done, timeout=WAIT)


def test_listed_marked_and_selected_everywhere(qtbot, make_window, data_dir):
    from workbench.ui.stalls.qt_stall_list import QtStallList

    cid = _store_answer_with_a_slow_token()
    window = make_window(load=False)
    _open(qtbot, window, cid)
    answer = window.chat_view.messages[-1]
    listing = answer.findChild(QtStallList)
    assert listing is not None and listing.isVisible()
    x = answer.token_x0 + 17
    # Numbered as the hover readout numbers it (its x on the plots), not one off.
    assert listing.lines == [f"token {x}: 90 ms (9.0× median), 20 MiB of experts read from "
                             "disk, waited 60 ms on expert reads"]
    # A marker on every plot that draws something at that token.
    assert window.stalls.markers.xs == {answer.shown.id: [x]}
    drawn = window.stalls.markers._items[answer.shown.id]
    assert {id(p) for p, _ in drawn} >= {id(window.telemetry.plots["wall"]),
                                         id(window.telemetry.plots["read"])}
    # A click on the listed token: marked on every plot (the Tokens view's path) and in the
    # answer's token view.
    listing.linkActivated.emit("stall:17")
    assert window.telemetry.highlighted_x == x
    assert window.telemetry.readout.text().startswith(f"token {x} ")  # the same number
    assert answer.tokens_button.isChecked() and answer._marked == (17, 17)
    # Away to a new conversation: the plots are cleared, and the markers with them.
    _open(qtbot, window, None)
    assert window.stalls.markers.xs == {}


def test_a_streamed_answer_gets_the_list_its_stored_rows_give(qtbot, make_window):
    from workbench.bench.stalls import explain_answer, prefill_of
    from workbench.ui.stalls.noteworthy import noteworthy
    from workbench.ui.stalls.qt_stall_list import QtStallList

    window = make_window()
    done = window.stalls.explained
    send(qtbot, window, "Name three rivers.")
    qtbot.waitUntil(lambda: window.stalls.explained > done, timeout=WAIT)
    answer = window.chat_view.messages[-1]
    run_id = answer.shown.stats.run_id
    stored = window.tasks.spawn(window.db.call(
        lambda s: (s.token_rows(run_id), s.get_run(run_id).summary)))
    qtbot.waitUntil(stored.done, timeout=WAIT)
    rows, summary = stored.result()
    # The answer's first token after its prefill, as the run's summary records it.
    expected = explain_answer(rows, prefill=prefill_of(summary), threads=window.config.n_threads)
    listing = answer.findChild(QtStallList)
    assert listing is not None
    shown = noteworthy(expected).listed
    x0 = answer.token_x0
    assert listing.lines == [t.line(expected.median_ms, x0 + t.index) for t in shown]
    assert listing.isVisibleTo(answer) == bool(shown)
    marked = window.stalls.markers.xs.get(answer.shown.id, [])
    assert marked == [x0 + t.index for t in shown]
