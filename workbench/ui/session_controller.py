"""The session in force (Qt-free): the one owner of the settings the window runs with, of the
model's lifecycle and of each conversation's own settings.

Three settings are told apart, and only here:

- `config`: the settings in force, those of the open session (or, with none open, those the
  next load starts from). Every widget shows these and every turn runs with them.
- `global_config`: the Settings dock's settings. A new conversation starts from them; Apply in
  the dock changes them (and the settings in force).
- a conversation's own settings (`conversation_settings.py`): its system prompt and sampling,
  applied while it is open and written back, from `keep_conversation_settings` only.

The model's lifecycle: `open` (with progress and Cancel), a reopen when a load-time setting
changes (`apply`), `close`. A model opens with the settings engine/opening.py decides
(`opening_settings`: its own from the last time, or defaults fitted to it and this machine,
under the per-request settings in force), its thread count measured at open when it streams
and the user did not choose one (`threads_chosen`). A load that fails leaves the model that
was open loaded (the bridge's ModelKept). Per-request changes go to the open session on the
engine thread, without a reload. One change at a time: a second Apply waits for the first's
reload to end.

Widgets do not hold copies: they ask (`config`, `model`, `loading`) and listen (`listen`), and
the listener (`ui/session_view.py` in the window) shows what changed. Failures arrive as
`error`/`info` events with the sentence to show, so the window only places them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from workbench.config import Config, signature
from workbench.engine import model_settings
from workbench.engine.opening import Opening, decide
from workbench.engine.requests import SessionError
from workbench.moe.layout import ModelFacts
from workbench.moe.memory_estimate import available_memory_mib
from workbench.ui.bridge import EngineBridge, LoadCancelled, LoadedModel, ModelKept
from workbench.ui.chat import conversation_settings
from workbench.ui.models.recent import add_recent, recent_file
from workbench.ui.ui_pacer import shared_pacer, ui_share_target

log = logging.getLogger("workbench.ui")

StoreCall = Callable[[Callable[[Any], Any]], Any]  # AsyncStore.call: runs fn(store), awaitable


class SessionListener(Protocol):
    """What the session tells its widgets (every method is optional: see `_emit`)."""

    def loading(self, name: str, reopening: bool) -> None:
        """A load began: `name` is the file's (or "the bundled model"); progress is 0."""

    def load_progress(self, fraction: float | None) -> None:
        """0..1 while loading; None when the load ended, however it ended."""

    def model_changed(self, model: LoadedModel | None) -> None:
        """A model opened (its settings are now in force), or the open one went (None)."""

    def load_failed(self) -> None:
        """The load ended without a model."""

    def config_changed(self, config: Config, think_changed: bool) -> None:
        """The settings in force changed without a reload (per-request, or nothing open)."""

    def apply_refused(self, config: Config) -> None:
        """An Apply did not happen: `config` (the settings in force) goes back on show."""

    def error(self, text: str) -> None:
        """Something the user should fix, as a sentence."""

    def info(self, text: str) -> None:
        """Something the user should know, as a sentence."""

    def status_note(self, text: str) -> None:
        """A transient note (the status bar's)."""


def _kept_text(name: str, kept: ModelKept, reopening: bool) -> str:
    """Why the model did not open, what to change, and that the working one is still there."""
    reason = str(kept).rstrip(".")
    what = ("change the settings back or to what the message asks, and apply again"
            if reopening else "pick another file, or change the settings the message names, "
            "with File > Open model…")
    still = (f"{kept.model.name} was opened again with the settings it had"
             if kept.reloaded else f"{kept.model.name} is still loaded, unchanged")
    return f"Could not open {name}: {reason}. {still}; to use {name}, {what}."


class SessionController:
    def __init__(self, bridge: EngineBridge, call: StoreCall, config: Config, data: Path,
                 spawn: Callable[..., Any]) -> None:
        self.bridge = bridge
        self._spawn = spawn  # Tasks.spawn: background work whose failure is shown
        self._call = call  # the database worker (conversations' settings)
        self.data = data  # where the recent-models list lives
        self.config = config  # in force
        self.global_config = config  # the Settings dock's
        self.model: LoadedModel | None = None
        self.loading = False
        # Each model's own load-time settings, from the last time it was open.
        self.remembered = model_settings.load_remembered(data)
        # Whether the user chose the thread count of the model in force (typed, edited in the
        # picker or the panel, or remembered as a choice): else it is measured at open.
        self.threads_chosen = False
        # Whether an answer is in progress (the chat controller says): no load meanwhile.
        self.answering: Callable[[], bool] = lambda: False
        # The conversation open in the window (the chat controller says): its own settings
        # follow an Apply.
        self.conversation: Callable[[], int | None] = lambda: None
        self._listeners: list[object] = []
        self._applying = asyncio.Lock()  # one settings change at a time
        # One write of the remembered files at a time, each of the latest state: two opens in a
        # row save twice, and an older snapshot finishing last would undo the newer choice.
        self._saving = asyncio.Lock()

    # ---- listeners ----------------------------------------------------------------------------

    def listen(self, listener: object) -> None:
        """`listener` implements any of SessionListener's methods."""
        self._listeners.append(listener)

    def _emit(self, event: str, *args: Any) -> None:
        for listener in self._listeners:
            method = getattr(listener, event, None)
            if method is not None:
                method(*args)

    # ---- the model's lifecycle ------------------------------------------------------------------

    def needs_reopen(self, config: Config) -> bool:
        """Whether `config` differs from the settings in force in a load-time setting."""
        return signature(config) != signature(self.config)

    async def open(self, config: Config, reopening: bool = False,
                   threads_chosen: bool | None = None) -> LoadedModel | None:
        """Load with progress and Cancel; failures are explained, and the app keeps running.

        `reopening`: the same model again with new load-time settings (the status says so).
        `threads_chosen`: the user chose `config.n_threads` (None: as for the model in force,
        or as remembered for this one). A second open while one loads cancels the first.
        """
        if self.answering():
            self._emit("error", "Stop the answer first, then open another model.")
            return None
        if self.loading:
            self.bridge.cancel_open()
            return None
        self.loading = True
        self._set_model(None)
        name = Path(config.model).name if config.model else "the bundled model"
        self._emit("loading", name, reopening)
        model: LoadedModel | None = None
        chosen = self.threads_chosen if threads_chosen is None else threads_chosen
        chosen = chosen or "n_threads" in self.remembered.get(config.model, {})
        try:
            model = await self.bridge.open(config, lambda f: self._emit("load_progress", f),
                                           measure_threads=config.moe_stream and not chosen)
        except ModelKept as kept:  # the model that worked is loaded still (or again)
            self.loading = False
            self._emit("load_progress", None)
            self._set_open(kept.model)
            self._emit("error", _kept_text(name, kept, reopening))
            return None
        except LoadCancelled:
            self._emit("info", "Loading was cancelled; no model is loaded. Open one with "
                               "File > Open model….")
        except SessionError as exc:
            self._emit("error", f"Could not open {name}: {exc}")
        except Exception as exc:  # e.g. the bundled model cannot be assembled: say so, go on
            self._emit("error", f"Could not open {name}: {exc}. Pick another model with "
                                "File > Open model….")
        finally:
            self.loading = False
            self._emit("load_progress", None)
        if model is None:
            self._emit("load_failed")
            return None
        self.threads_chosen = chosen
        self._set_open(model)
        if model.thread_choice is not None:
            self._emit("status_note", f"Threads: {model.thread_choice.describe()}.")
        if model.config.model:
            self._spawn(self._remember(model.config.model))
        self._spawn(self._remember_settings(model.config, chosen))
        return model

    def _set_open(self, model: LoadedModel) -> None:
        self.config = model.config
        shared_pacer().target_share = ui_share_target(model.config.n_threads)
        self._set_model(model)

    def opening_settings(self, path: Path, facts: ModelFacts | None) -> Opening:
        """What the model at `path` opens with (shown before loading): its own load-time
        settings from the last time, or defaults fitted to it and this machine's memory; the
        per-request settings are those in force."""
        return decide(str(path), window=self.config, remembered=self.remembered, facts=facts,
                      available_mib=available_memory_mib())

    async def _remember_settings(self, config: Config, threads_chosen: bool) -> None:
        self.remembered = model_settings.with_model(self.remembered, config,
                                                    threads_chosen=threads_chosen)
        try:
            async with self._saving:
                await asyncio.get_running_loop().run_in_executor(
                    None, model_settings.save_remembered, self.data, self.remembered)
        except OSError as exc:  # a convenience: the model opens with defaults next time
            log.warning("the model's settings were not remembered: %s", exc)

    def _set_model(self, model: LoadedModel | None) -> None:
        self.model = model
        self._emit("model_changed", model)

    async def _remember(self, model: str) -> None:
        recent = recent_file(self.data)
        try:
            async with self._saving:  # read, change, write: two at once would lose one
                await asyncio.get_running_loop().run_in_executor(None, add_recent, model, recent)
        except OSError as exc:  # the model is open all the same; only the list is behind
            self._emit("error", f"The list of recent models was not updated: {exc}")

    async def close(self) -> None:
        """Free the model and stop the engine thread (the window is closing)."""
        self.bridge.cancel()
        self.bridge.cancel_open()
        await self.bridge.close()
        self.model = None

    # ---- settings -----------------------------------------------------------------------------

    async def apply(self, config: Config, reopen: bool = False) -> bool:
        """The Settings dock's Apply: `config` becomes the global settings and the settings in
        force. Load-time changes reopen the model; per-request ones go to the open session,
        with no reload. On failure the settings in force go back on show."""
        # A thread count changed in the panel is the user's choice from now on.
        chosen = self.threads_chosen or config.n_threads != self.config.n_threads
        async with self._applying:
            ok = await self._apply(config, reopen or self.needs_reopen(config), chosen=chosen)
        if not ok:
            self._emit("apply_refused", self.config)
            return ok
        self.global_config = self.config
        cid = self.conversation()
        if cid is not None:  # the open conversation is used with them from now on
            await self.keep_conversation_settings(cid)
        return ok

    async def use_conversation(self, conversation_id: int | None,
                               stored: dict[str, Any]) -> None:
        """A conversation opens: run with its own settings (a new one: the global ones)."""
        source = (conversation_settings.config_for(self.global_config, stored)
                  if conversation_id is not None else self.global_config)
        wanted = conversation_settings.settings_of(source)
        if wanted == conversation_settings.settings_of(self.config):
            self._emit("config_changed", self.config, False)
            return
        async with self._applying:
            await self._apply(self.config.replace(**wanted), reopen=False, quiet=True)

    async def apply_conversation_settings(self, chosen: Config) -> bool:
        """The conversation's own settings (its header's dialog): in force now, kept with it;
        the global settings stay as they are."""
        async with self._applying:
            ok = await self._apply(self.config.replace(
                **conversation_settings.settings_of(chosen)), reopen=False)
        cid = self.conversation()
        if ok and cid is not None:
            await self.keep_conversation_settings(cid)
        return ok

    async def keep_conversation_settings(self, conversation_id: int,
                                         quiet: bool = False) -> bool:
        """Write what `conversation_id` runs with: it opens with these next time. The one
        writer of a conversation's settings. `quiet`: a failure is only logged (the caller
        has said what went wrong already)."""
        used = conversation_settings.settings_of(self.config)
        try:
            await self._call(lambda s: s.set_conversation_settings(conversation_id, used))
        except Exception as exc:  # the settings apply all the same; only the memory is behind
            if quiet:
                log.warning("a conversation's settings were not saved: %s", exc)
            else:
                self._emit("error", f"The conversation's settings were not saved ({exc}); "
                                    "they apply until another conversation is opened.")
            return False
        return True

    async def _apply(self, config: Config, reopen: bool, quiet: bool = False,
                     chosen: bool | None = None) -> bool:
        if self.loading:
            if not quiet:  # a conversation opened meanwhile keeps the settings being loaded
                self._emit("error", "A model is loading: wait for it, then apply the settings.")
            return False
        if reopen:
            return await self.open(config, reopening=True, threads_chosen=chosen) is not None
        if self.model is None:  # nothing is open: the next load starts from these
            self.config = config
            self.threads_chosen = bool(chosen) or self.threads_chosen
            self._emit("config_changed", config, False)
            return True
        try:  # queued behind a streaming answer, if any: it applies from the next one
            model = await self.bridge.apply_settings(config)
        except SessionError as exc:
            self._emit("error", f"Could not apply the settings: {exc}")
            return False
        think_changed = model.config.think != self.config.think
        self.model, self.config = model, model.config
        self._emit("config_changed", model.config, think_changed)
        if not quiet:
            self._emit("status_note", "Settings applied: the next answer uses them.")
        return True
