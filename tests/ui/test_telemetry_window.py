"""The plots in the real window: what they call the expert reads follows the open session."""

from __future__ import annotations

from tests.ui.user_actions import WAIT, send


def test_the_plots_say_flash_only_when_the_session_reads_with_o_direct(qtbot, make_window,
                                                                        model_config,
                                                                        tiny_moe_path):
    from workbench.ui.telemetry.series import PLOTS, plot_title

    read = next(p for p in PLOTS if p.key == "read")
    window = make_window()  # the embedded model is dense: nothing is streamed
    assert not window.chat.model.o_direct and not window.telemetry.o_direct
    assert window.telemetry.plots["read"].titleLabel.text == plot_title(read, False)
    for o_direct in (False, True):
        config = model_config.replace(model=str(tiny_moe_path), moe_stream=True,
                                      o_direct=o_direct)
        task = window.tasks.spawn(window.load_model(config))
        qtbot.waitUntil(task.done, timeout=WAIT)
        model = task.result()
        # As resolved at load: a file system may refuse O_DIRECT, and then reads are buffered.
        resolved = bool(model.run_info.settings["o_direct"])
        assert model.o_direct == resolved == (o_direct and resolved)
        assert window.telemetry.o_direct == resolved
        assert window.telemetry.plots["read"].titleLabel.text == plot_title(read, resolved)


def _plotted(window) -> tuple[list[int], list[int]]:
    ring = window.telemetry.ring
    view = ring.view()
    return ([int(x) for x in view[:, ring.index["x"]]],
            [int(t) for t in view[:, ring.index["turn"]]])


def test_a_continued_answer_is_one_series_live_and_when_reopened(qtbot, make_window):
    from tests.ui.test_continue_and_warnings import STORY, continue_

    window = make_window()  # 16 tokens per answer: cut by the limit, Continue offered
    send(qtbot, window, STORY)
    answer = window.chat_view.messages[-1]
    continue_(qtbot, window, answer)

    def check() -> None:
        xs, turns = _plotted(window)
        assert xs == list(range(32))  # both runs, continuous
        assert set(turns) == {turns[0]}  # one answer: one turn
        assert window.telemetry.run_starts == [16]  # where the continuation began, marked
        widget = window.chat_view.messages[-1]
        assert widget.token_x0 == 0 and len(widget.token_pieces) == 32
        assert widget.shown.stats.x_start == 0

    check()
    cid = window.chat.conversation_id
    for conversation in (None, cid):  # away and back: the plots come from the store
        task = window.tasks.spawn(window.chat.open_conversation(conversation))
        qtbot.waitUntil(task.done, timeout=WAIT)
    check()
