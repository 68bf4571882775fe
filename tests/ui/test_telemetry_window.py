"""The plots in the real window: what they call the expert reads follows the open session."""

from __future__ import annotations

from tests.ui.user_actions import WAIT


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
