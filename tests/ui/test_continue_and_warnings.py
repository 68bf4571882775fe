"""Continue in the window (after the token limit and after Stop) and the session's warnings
(the expert cache cliff) in the notice bar, on the real engine."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from tests.ui.user_actions import WAIT, send
from workbench.store import Store, default_path

STORY = "Write a long story about the sea."


def stored_path(window) -> list:
    with Store.open(default_path(), recover=False) as store:
        return store.active_path(window.chat.conversation_id)


def continue_(qtbot, window, widget) -> None:
    done = window.chat.turns_done
    assert widget.continue_button.isVisible() and widget.continue_button.isEnabled()
    widget.continue_button.click()
    qtbot.waitUntil(lambda: window.chat.turns_done > done, timeout=WAIT)


def test_continue_after_the_token_limit_appends_to_the_same_answer(qtbot, make_window):
    window = make_window()  # 16 tokens per answer
    send(qtbot, window, STORY)
    answer = window.chat_view.messages[-1]
    assert answer.shown.stats.stop_reason == "length"
    first = answer.shown.content
    held = window.chat.last_result.summary.n_past
    continue_(qtbot, window, answer)
    assert len(window.chat_view.messages) == 2  # no new message: the same one grew
    answer = window.chat_view.messages[-1]
    assert answer.shown.content.startswith(first) and len(answer.shown.content) > len(first)
    summary = window.chat.last_result.summary
    # The KV already held it: only the last token is read again (the shown answer may lack a
    # trailing space the model generated, so the prompt can be a token shorter than the KV).
    assert summary.n_prompt <= 2 and summary.n_reused >= held - 2
    assert summary.n_past > held
    _user, stored = stored_path(window)
    assert stored.content == answer.shown.content and stored.status == "complete"
    assert stored.stats.stop_reason == "length"  # cut again: Continue is offered again
    assert answer.continue_button.isVisible()


def test_a_continued_answer_s_stats_describe_both_runs_live_and_reopened(qtbot, make_window):
    window = make_window()  # 16 tokens per answer
    send(qtbot, window, STORY)
    first = window.chat.last_result.summary
    continue_(qtbot, window, window.chat_view.messages[-1])
    second = window.chat.last_result.summary
    total = first.n_generated + second.n_generated
    rate = total / (first.gen_seconds + second.gen_seconds)

    def check(widget) -> None:
        stats, line = widget.shown.stats, widget.stats.text()
        assert stats.n_generated == total and f"{total} tokens" in line
        assert stats.tok_s == pytest.approx(rate, abs=0.01) and f"{stats.tok_s:.1f} tok/s" in line
        # The question's prefill, not the continuation's re-read of a token or two.
        assert stats.n_prompt == first.n_prompt and stats.n_reused == first.n_reused
        assert "continued 1×" in line and line.endswith("token limit reached")

    check(window.chat_view.messages[-1])
    with Store.open(default_path(), recover=False) as store:  # the runs say the same
        runs = store.list_runs(message_id=window.chat_view.messages[-1].shown.id)
        assert len(runs) == 2
        assert sum(r.summary["n_generated"] for r in runs) == total
    cid = window.chat.conversation_id
    for each in (None, cid):  # away and back: the line is drawn from what was stored
        task = window.tasks.spawn(window.chat.open_conversation(each))
        qtbot.waitUntil(task.done, timeout=WAIT)
    check(window.chat_view.messages[-1])
    assert stored_path(window)[-1].stats == window.chat_view.messages[-1].shown.stats


def test_continue_after_stop_finishes_the_answer_and_it_joins_the_context(qtbot, make_window,
                                                                          model_config):
    window = make_window(model_config.replace(n_predict=200))
    window.composer.prompt.setPlainText(STORY)
    qtbot.keyClick(window.composer.prompt, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: window.telemetry.next_x >= 3, timeout=WAIT)
    qtbot.keyClick(window.composer.prompt, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: not window.chat.generating, timeout=WAIT)
    stopped = window.chat_view.messages[-1]
    assert stopped.shown.status == "stopped" and stopped.shown.content
    partial = stopped.shown.content
    window.session.config = window.session.config.replace(n_predict=12)
    continue_(qtbot, window, stopped)
    grown = window.chat_view.messages[-1]
    assert grown.shown.id == stopped.shown.id and grown.shown.content.startswith(partial)
    assert len(grown.shown.content) > len(partial)
    assert grown.shown.status == "complete" and grown.badge.text() == ""
    assert stored_path(window)[-1].content == grown.shown.content
    # A continued answer is a complete turn: the next message has it in its context.
    window.session.config = window.session.config.replace(n_predict=4)
    send(qtbot, window, "Thanks.")
    history = [m["content"] for m in window.chat.last_result.history]
    assert history[:2] == [STORY, grown.shown.content]


def test_continue_is_offered_only_for_an_answer_cut_short(qtbot):
    from workbench.store import MessageStats
    from workbench.ui.chat.qt_message_widget import QtMessageWidget
    from workbench.ui.chat.shown import ShownMessage

    def offered(**kw) -> bool:
        widget = QtMessageWidget(ShownMessage(id=1, **{"role": "assistant", "content": "Hi",
                                                       **kw}))
        qtbot.addWidget(widget)
        widget.show()
        return widget.continue_button.isVisible()

    assert offered(stats=MessageStats(stop_reason="length"))
    assert offered(status="stopped", stats=MessageStats(stop_reason="stopped"))
    assert not offered(stats=MessageStats(stop_reason="eos"))
    assert not offered(status="error", stats=MessageStats(stop_reason="error"))
    assert not offered(status="stopped", content="")  # stopped before a word: nothing to go on
    assert not offered(role="user", status="stopped")
    # With reasoning too: cut in it (no answer text yet), or after it.
    assert offered(status="stopped", content="", reasoning="hmm",
                   stats=MessageStats(stop_reason="stopped"))
    assert offered(content="", reasoning="hmm", stats=MessageStats(stop_reason="length"))
    assert offered(reasoning="hmm", stats=MessageStats(stop_reason="length"))
    assert not offered(reasoning="hmm", stats=MessageStats(stop_reason="eos"))


def test_continue_offered_on_an_answer_cut_in_its_reasoning_goes_on_there(qtbot, make_window,
                                                                         model_config):
    from workbench.paths import llama_templates_dir

    # The R1 template opens <think> in the prompt: the base model's answer is all reasoning.
    template = llama_templates_dir() / "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"
    window = make_window(model_config.replace(chat_template_file=str(template)))
    window.composer.think.setChecked(True)
    send(qtbot, window, STORY)
    answer = window.chat_view.messages[-1]
    assert answer.shown.stats.stop_reason == "length"
    thought = answer.shown.reasoning
    assert thought and answer.shown.content == ""
    continue_(qtbot, window, answer)
    grown = window.chat_view.messages[-1]
    assert grown.shown.id == answer.shown.id
    assert grown.shown.reasoning.startswith(thought) and len(grown.shown.reasoning) > len(thought)
    assert grown.shown.content == ""
    _user, stored = stored_path(window)
    assert (stored.reasoning, stored.content) == (grown.shown.reasoning, "")
    assert stored.stats.n_think == 32  # both runs' thinking


def test_the_expert_cache_cliff_warning_appears_in_the_window(qtbot, make_window, model_config,
                                                              tiny_moe_path):
    window = make_window(model_config.replace(model=str(tiny_moe_path), n_ctx=256,
                                              moe_stream=True, cache_mb=1))
    assert window.chat.model is not None  # the model is open: the warning is advice
    assert window.notice.kind == "error"
    assert "smaller than one token's expert demand" in window.notice.text
    assert "Use a larger cache, or none." in window.notice.text


def test_no_warning_with_a_cache_that_fits(qtbot, make_window, model_config, tiny_moe_path):
    window = make_window(model_config.replace(model=str(tiny_moe_path), n_ctx=256,
                                              moe_stream=True, cache_mb=64))
    assert window.chat.model is not None
    assert "expert demand" not in window.notice.text


def test_a_continue_the_engine_refuses_leaves_the_answer_as_it_was(qtbot, make_window,
                                                                   model_config):
    from workbench.paths import llama_templates_dir

    template = llama_templates_dir() / "openai-gpt-oss-120b.jinja"  # a channel format
    window = make_window(model_config.replace(chat_template_file=str(template)))
    send(qtbot, window, STORY)
    answer = window.chat_view.messages[-1]
    assert answer.shown.stats.stop_reason == "length" and answer.shown.content
    # As if the model had reasoned in its analysis channel (the base model never does).
    window.chat.path[-1].reasoning = "The user wants a story."
    before = window.chat.path[-1]
    continue_(qtbot, window, answer)
    assert "cannot be continued" in window.notice.text
    _user, stored = stored_path(window)
    assert (stored.status, stored.error) == (before.status, before.error) == ("complete", "")
    assert (stored.content, stored.reasoning) == (before.content, "The user wants a story.")
    assert stored.stats.stop_reason == "length"
    assert window.chat_view.messages[-1].continue_button.isVisible()
