"""The window's widgets, listening to the session controller: what a load, an Apply or a
failure shows (status bar, notice bar, the composer's thinking switch, the settings and runs
pages, the conversation's header, the cache-sizing view).

It holds no settings of its own: every figure it shows comes from the event it is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.config import Config
from workbench.engine.chat.think import ThinkControl, think_control_note
from workbench.ui.bridge import LoadedModel

STATUS_NOTE_MS = 5000  # how long a transient status-bar note stays


def _sentence(text: str) -> str:
    """A warning as a sentence of the notice (the CLI's read "warning: ...")."""
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


@dataclass(slots=True)
class SessionView:
    """A SessionListener over the window's widgets (typed loosely: they are Qt widgets, and
    this module stays importable without a QApplication)."""

    status: Any  # QtStatusBar
    notice: Any  # QtNoticeBar
    composer: Any  # QtComposer
    settings_page: Any  # QtSettingsPage
    runs_page: Any  # QtRunsPage
    conversation_header: Any  # QtConversationHeader
    cache_sizing: Any  # QtCacheSizing

    def loading(self, name: str, reopening: bool) -> None:
        self.status.set_state("loading")
        self.status.set_loading(0.0)
        self.status.set_model(f"reopening the model ({name}) with the new settings…"
                              if reopening else f"loading {name}…")

    def load_progress(self, fraction: float | None) -> None:
        self.status.set_loading(fraction)
        if fraction is not None:
            self.status.set_state("loading", f"{fraction:.0%}")

    def load_failed(self) -> None:
        self.status.set_state("no model")
        self.status.set_model("no model: File > Open model…")

    def model_changed(self, model: LoadedModel | None) -> None:
        if model is None:
            return
        self.cache_sizing.set_model(model)
        self.show_config(model.config)
        self.status.set_model(f"{model.name} · {model.arch} · {model.n_ctx} context · "
                              f"loaded in {model.load_seconds:.1f} s")
        self.status.set_state("idle")
        control = ThinkControl(model.think_control)
        if not model.chat_mode:
            self.composer.show_no_thinking("raw text: no chat template")
        elif not model.reasons:  # shown ticked, it said a model thinks that cannot
            self.composer.show_no_thinking("this model does not reason (its chat template "
                                           "marks no reasoning)")
        else:
            self.composer.set_think_control(control.value, think_control_note(control),
                                            model.config.think)
        if model.warnings:  # the settings work, but badly (the expert cache cliff): say so
            self.notice.show_error(" ".join(_sentence(w) for w in model.warnings))
        elif "synthetic" in model.name.lower():
            self.notice.show_info("This is a synthetic MoE with random weights: it exercises "
                                  "expert streaming, and its text is noise.")
        elif self.notice.kind == "error":
            self.notice.dismiss()

    def config_changed(self, config: Config, think_changed: bool) -> None:
        if think_changed and self.composer.think.isEnabled():
            self.composer.think.setChecked(config.think)
        self.show_config(config)

    def apply_refused(self, config: Config) -> None:
        self.settings_page.set_config(config)

    def error(self, text: str) -> None:
        self.notice.show_error(text)

    def info(self, text: str) -> None:
        self.notice.show_info(text)

    def status_note(self, text: str) -> None:
        self.status.showMessage(text, STATUS_NOTE_MS)

    def show_config(self, config: Config) -> None:
        """The pages show the settings in force. The settings page is only reset when it
        shows something else, so edits made meanwhile survive an apply that changed nothing."""
        if self.settings_page.panel.current != config:
            self.settings_page.set_config(config)
        self.runs_page.set_config(config)
        self.conversation_header.show_config(config)
