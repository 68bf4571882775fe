"""Labels that are true (issue 39): the speculation lane says speculation is off (not "needs
expert streaming" while streaming is on), the cache-sizing view says it is reading and computing
(not "after the first answer" seconds after it), and a model that cannot reason is not shown
with Thinking ticked."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from tests.ui.test_readable_plots import panel  # noqa: F401 - the fixture
from tests.ui.test_telemetry_panel import row


def test_an_empty_speculation_lane_says_speculation_is_off(panel) -> None:  # noqa: F811
    panel.begin_turn()
    for i in range(20):  # streaming figures measured, speculation off (-1: a gap)
        panel.append({**row(i), "draft_len": -1.0, "draft_kept": -1.0})
    panel.repaint()
    spec = panel._empty_labels["spec"]
    assert spec.isVisible() and "speculation is off" in spec.toPlainText()
    assert "streaming" not in spec.toPlainText()
    assert not panel._empty_labels["wall"].isVisible()
    # Without streaming, the streamer's plots still say what would measure them.
    panel.clear()
    panel.begin_turn()
    for i in range(20):
        panel.append({**row(i), "cache_hit_pct": -1.0, "read_bytes": -1, "io_ms": -1.0,
                      "mgmt_ms": -1.0})
    panel.repaint()
    assert "needs expert streaming" in panel._empty_labels["hit"].toPlainText()


def test_the_cache_view_says_what_it_is_doing_after_an_answer(qtbot, run) -> None:
    from workbench.ui.telemetry.qt_cache_sizing import NEEDS_STREAMING, READING, QtCacheSizing

    view = QtCacheSizing()
    qtbot.addWidget(view)
    view.show()
    qtbot.waitExposed(view)
    view.set_model(SimpleNamespace(is_moe=True, config=SimpleNamespace(moe_stream=True)))
    assert "first answer" in view.message.text()  # before any answer: true
    gate = asyncio.Event()

    async def fetch():  # the engine thread's routing, held back to see the view meanwhile
        await gate.wait()

    view.request(fetch)  # an answer ended
    assert view.message.text() == READING
    gate.set()
    run(view.wait_idle())
    assert view.message.text() == NEEDS_STREAMING  # what the (empty) fetch said


def test_thinking_is_not_shown_ticked_for_a_model_that_cannot_reason(make_window, model_config):
    from workbench.paths import llama_templates_dir

    window = make_window()  # gemma's built-in template marks no reasoning
    think = window.composer.think
    assert not think.isChecked() and not think.isEnabled()
    assert "does not reason" in window.composer.think_note.text()
    # Control: a template that reasons gets the switch.
    r1 = llama_templates_dir() / "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"
    window2 = make_window(model_config.replace(chat_template_file=str(r1)))
    assert window2.composer.think.isEnabled()
    assert "does not reason" not in window2.composer.think_note.text()
