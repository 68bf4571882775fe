"""The cache-sizing dock in the real window: a real chat on the tiny synthetic MoE with a cache
that evicts, the curves computed off the UI thread from the routing the session recorded, and
the last answer saved as a route trace of that turn in the data directory."""

from __future__ import annotations

import numpy as np

from tests.ui.test_expert_map_window import menu_action
from tests.ui.user_actions import WAIT, send
from workbench.moe.route_trace import read_trace
from workbench.moe.routes import Phase
from workbench.ui.telemetry.qt_cache_sizing import NEEDS_STREAMING


def test_the_curves_follow_the_conversation_and_mark_the_budget(qtbot, make_window, model_config,
                                                                 tiny_moe_path, run, data_dir):
    window = make_window(model_config.replace(model=str(tiny_moe_path), moe_stream=True,
                                              cache_mb=1, n_predict=12))
    view = window.cache_sizing
    assert window.cache_dock.widget() is view
    assert window.cache_dock in window.tabifiedDockWidgets(window.telemetry_dock)
    assert menu_action(window, "View", "Cache sizing").isCheckable()
    assert view.pages.currentIndex() == 0 and "first answer" in view.message.text()

    # Hidden behind the telemetry tab, an answer only marks the view stale: no replay runs.
    send(qtbot, window, "Hello there, how are you?")
    assert view.computations == 0 and view._stale
    window.show_dock(window.cache_dock)
    qtbot.waitUntil(lambda: view.computations == 1, timeout=WAIT)
    c = view.curves
    assert view.pages.currentIndex() == 1
    assert c.current_mib == 1.0 and 0 < c.cliff_mib < c.total_mib
    assert c.tokens == window.chat.last_result.summary.n_generated
    assert np.all(np.diff(c.budget_mib) > 0) and c.budget_mib[-1] == c.total_mib
    assert np.all(c.belady_hit_pct >= c.lru_hit_pct)
    # With room for every expert both policies miss only first touches: the same hit rate.
    assert c.lru_hit_pct[-1] == c.belady_hit_pct[-1]
    # The plot shows these numbers, the budget line sits at the budget, the cliff is shaded.
    x, y = view.items.lru.getData()
    assert np.array_equal(x, c.budget_mib) and np.array_equal(y, c.lru_hit_pct)
    assert view.items.budget.value() == 1.0 and view.items.budget.isVisible()
    assert view.items.cliff.getRegion() == (0.0, c.cliff_mib)
    lru_mib, _ = c.reads_at(1.0)
    assert "Budget 1 MiB" in view.budget_label.text()
    assert f"{lru_mib:.2f} MiB read per token" in view.budget_label.text()
    assert view.readout_at(c.total_mib).startswith(f"At {c.total_mib:.0f} MiB: LRU")

    # A second answer, the view on screen: recomputed at once, from both turns.
    send(qtbot, window, "Tell me more.")
    qtbot.waitUntil(lambda: view.computations == 2, timeout=WAIT)
    assert view.curves.tokens == c.tokens + window.chat.last_result.summary.n_generated

    # Tools > Save route trace: the last answer's routing, in the data directory, off the UI
    # thread.
    saved = run(window.save_route_trace())
    assert saved is not None and saved.parent == data_dir / "route-traces"
    assert str(saved) in window.notice.text
    trace = read_trace(saved)
    turns = {t.turn for t in trace.loads}
    assert turns == {window.chat.last_result.summary.turn}
    assert any(t.load.phase is Phase.DECODE for t in trace.loads)


def test_a_session_that_does_not_stream_has_no_curves(qtbot, make_window, run):
    window = make_window()  # the embedded dense model
    assert window.cache_sizing.message.text() == NEEDS_STREAMING
    assert run(window.save_route_trace()) is None
    assert "No routing to save" in window.notice.text


def test_another_conversation_has_its_own_curves(qtbot, make_window, model_config, tiny_moe_path,
                                                 run):
    window = make_window(model_config.replace(model=str(tiny_moe_path), moe_stream=True,
                                              cache_mb=2, n_predict=8))
    view = window.cache_sizing
    window.show_dock(window.cache_dock)
    send(qtbot, window, "First conversation.")
    qtbot.waitUntil(lambda: view.computations == 1, timeout=WAIT)
    first = window.chat.conversation_id
    run(window.conversations.open(None))  # a new, empty conversation: nothing routed yet
    qtbot.waitUntil(lambda: view.pages.currentIndex() == 0, timeout=WAIT)
    assert "first answer" in view.message.text()
    run(window.conversations.open(first))  # back: its curves again
    qtbot.waitUntil(lambda: view.computations == 2, timeout=WAIT)
    assert view.curves.tokens == window.chat.last_result.summary.n_generated
