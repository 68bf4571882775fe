"""Issue 29, items 2 and 3, in the window on real models: a model opens with its own settings
(remembered, or defaults fitted to it), shown in the picker before loading, never with those
chosen for the model open before; a load that fails leaves the working model loaded, and the
message says why and what to change; the picker's Synthetic MoE opens with what it offers."""

from __future__ import annotations

from pathlib import Path

from tests.ui.user_actions import WAIT, send
from workbench.ui.models.qt_model_picker import BUNDLED, SYNTHETIC, QtModelPicker


def open_picker(qtbot, window, preselect: str | None = None):
    task = window.tasks.spawn(window.pick_model(preselect=preselect), name="pick-model")
    qtbot.waitUntil(lambda: window.findChild(QtModelPicker) is not None
                    and window.findChild(QtModelPicker).isVisible(), timeout=WAIT)
    picker = window.findChild(QtModelPicker)
    return task, picker


def load_from_picker(qtbot, run, window, entry: str):
    task, picker = open_picker(qtbot, window, preselect=entry)
    qtbot.waitUntil(lambda: picker.open_button.isEnabled() and picker.opening is not None,
                    timeout=WAIT)
    shown = (picker.n_ctx.value(), picker.opens_with.text())
    picker.open_button.click()
    qtbot.waitUntil(task.done, timeout=WAIT)
    task.result()
    assert not window.loading
    return shown


def test_a_model_opens_with_its_own_settings_not_the_previous_models(
        qtbot, run, make_window, embedded_model_path, chat_model_path):
    window = make_window()  # gemma at 512 tokens
    assert window.chat.model is not None and window.chat.model.n_ctx == 512
    # The user gives gemma a 256-token context (a load-time change: it reopens).
    assert run(window.apply_settings(window.config.replace(n_ctx=256), reopen=True))
    assert window.chat.model.n_ctx == 256

    # Another model: its picker entry shows defaults for it, not gemma's 256.
    n_ctx, note = load_from_picker(qtbot, run, window, BUNDLED)
    assert n_ctx == 4096 and "defaults for this model" in note
    assert "context 4,096 tokens" in note or "context 4096 tokens" in note
    assert window.chat.model is not None
    assert Path(window.chat.model.path) == chat_model_path
    assert window.chat.model.n_ctx == 4096 and window.config.n_ctx == 4096

    # Back to gemma: it opens with its own 256 from last time, and says so before loading.
    n_ctx, note = load_from_picker(qtbot, run, window, str(embedded_model_path))
    assert n_ctx == 256 and "its own settings from the last time" in note
    assert window.chat.model.n_ctx == 256
    send(qtbot, window, "Hello")
    assert window.chat_view.messages[-1].shown.status == "complete"


def test_the_synthetic_moe_opens_with_the_defaults_the_picker_offers(
        qtbot, run, make_window, model_config, tmp_path, monkeypatch):
    """Its trained context is 256 tokens: the window's 512 tokens to generate did not fit, so
    the load was refused with settings the picker itself had offered."""
    import workbench.embedded

    monkeypatch.setattr(workbench.embedded, "models_dir", lambda: tmp_path)
    window = make_window(config=model_config.replace(n_ctx=1024, n_predict=512))
    assert window.chat.model is not None
    n_ctx, note = load_from_picker(qtbot, run, window, SYNTHETIC)
    assert n_ctx == 256 and "Tokens to generate lowered from 512 to 128" in note
    model = window.chat.model
    assert model is not None and model.is_moe and "synthetic" in model.path
    assert model.config.n_ctx == 256 and model.config.n_predict == 128
    assert window.notice.kind == "info" and "synthetic MoE" in window.notice.text


def test_a_file_refused_before_loading_leaves_the_open_model_untouched(
        qtbot, run, make_window, tmp_path):
    window = make_window()
    session, before = window.bridge._live, window.config
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 16)
    assert run(window.load_model(before.replace(model=str(bad)))) is None
    assert window.bridge._live is session  # never closed
    assert window.chat.model is not None and window.config == before
    assert window.notice.kind == "error"
    text = window.notice.text
    assert "broken.gguf" in text and "is still loaded, unchanged" in text
    assert "pick another file" in text
    assert window.status.state == "idle" and window.composer.button.isEnabled()
    send(qtbot, window, "Hello")
    assert window.chat_view.messages[-1].shown.status == "complete"


def test_a_load_that_fails_opens_the_working_model_again(qtbot, run, make_window, tmp_path):
    """A chat template that is not UTF-8 is found only while loading, after the open model was
    closed: the model that worked comes back with its settings, and the settings dock too."""
    window = make_window()
    before = window.config
    template = tmp_path / "latin1.jinja"
    template.write_bytes("{{ 'caf\xe9' }}".encode("latin-1"))
    page = window.settings_page.panel
    page.rows["chat_template_file"].editor.line.setText(str(template))
    assert page.evaluation.reopen
    page.apply_button.click()
    run(window.tasks.wait_idle())
    assert window.chat.model is not None and window.bridge._live is not None
    assert window.config == before and page.current == before
    text = window.notice.text
    assert window.notice.kind == "error" and "not UTF-8" in text
    assert "was opened again with the settings it had" in text
    assert "change the settings back" in text
    send(qtbot, window, "Hello")
    assert window.chat_view.messages[-1].shown.status == "complete"
