"""A reasoning stream renders as a reasoning block: live and expanded while the model thinks,
folded under "Thought for N s" afterwards (real template, real parser, scripted tokens)."""

from __future__ import annotations

import pytest

from tests.ui.scripted_bridge import ScriptedBridge
from workbench.engine.chat.template import ChatTemplate
from workbench.paths import llama_templates_dir

WAIT = 30_000
PIECES = ["<think>", "\nThe user", " wants a sum", ".\n", "</think>", "\n\n", "2 + 2", " = 4."]


@pytest.fixture
def qwen3() -> ChatTemplate:
    path = llama_templates_dir() / "Qwen-Qwen3-0.6B.jinja"
    return ChatTemplate(source=path.read_text(), bos_token="", eos_token="<|im_end|>")


def test_reasoning_streams_into_a_live_block_then_folds(qtbot, run, make_window, qwen3,
                                                        model_config):
    bridge = ScriptedBridge(qwen3, PIECES)
    window = make_window(bridge=bridge, load=False)
    assert run(window.load_model(model_config)) is not None
    window.composer.send_requested.emit("What is 2 + 2?")
    # The answer is in progress from the press of Enter; its widget comes once both messages
    # are stored.
    qtbot.waitUntil(lambda: len(window.chat_view.messages) == 2, timeout=WAIT)
    answer = window.chat_view.messages[-1]

    bridge.release(3)
    qtbot.waitUntil(lambda: window.telemetry.next_x == 3, timeout=WAIT)
    answer.flush()
    block = answer.reasoning
    assert block.live and block.expanded and block.isVisible()
    assert block.toggle.text().startswith("Thinking…") and "3 tokens" in block.toggle.text()
    assert block.body.text() == "The user wants a sum"
    assert answer.body.markdown == ""  # nothing of the thinking leaks into the answer

    bridge.release(len(PIECES) - 3)
    qtbot.waitUntil(lambda: not window.chat.generating, timeout=WAIT)
    assert not block.live and not block.expanded and block.isVisible()
    assert block.toggle.text() == "Thought for 1.5 s"  # 6 thinking tokens x 250 ms (engine)
    assert block.body.text() == "The user wants a sum."
    assert answer.body.markdown == "2 + 2 = 4."
    assert answer.shown.stats.n_think == 6
    block.toggle.click()
    assert block.expanded and block.body.isVisible()

    # The next turn's history carries the reasoning separately, never inside the answer.
    bridge.pieces = ["Sure."]
    bridge.release(1)
    window.composer.send_requested.emit("Thanks")
    qtbot.waitUntil(lambda: window.chat.turns_done == 2, timeout=WAIT)
    assert bridge.history == [
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "2 + 2 = 4.",
         "reasoning_content": "The user wants a sum."},
    ]
