"""The window measures a streamed model's thread count at open unless the user chose it (issue
38): typed at start, edited in the picker, changed in the panel, or remembered as a choice. The
choice and its reason go to the status bar's note. The bridge here only records what the
session controller asks of it (the real load and measurement: tests/engine/
test_threads_at_open.py)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from workbench.config import Config
from workbench.engine import model_settings
from workbench.engine.thread_choice import ThreadChoice
from workbench.ui.bridge import LoadedModel
from workbench.ui.session_controller import SessionController

MODEL = "/models/big-moe.gguf"
STREAMED = Config(model=MODEL, moe_stream=True, cache_mb=64, n_threads=4)
MEASURED = ThreadChoice(2, "fastest measured at open (tok/s by threads 1:5.0 2:9.0)", 0.4)


class RecordingBridge:
    """Opens nothing; says which loads were asked to measure their thread count."""

    def __init__(self) -> None:
        self.measured: list[bool] = []

    async def open(self, config: Config, on_progress: Any = None,
                   measure_threads: bool = False) -> LoadedModel:
        self.measured.append(measure_threads)
        choice = MEASURED if measure_threads else None
        if choice is not None:
            config = config.replace(n_threads=choice.threads)
        return LoadedModel(config=config, name="big-moe", path=config.model, arch="qwen3moe",
                           n_ctx=config.n_ctx, chat_mode=True, think_control="template",
                           template_origin="test", load_seconds=0.0,
                           run_info={"settings": config.to_dict()}, is_moe=True,
                           thread_choice=choice)

    def cancel_open(self) -> None:
        pass


class Notes:
    def __init__(self) -> None:
        self.notes: list[str] = []

    def status_note(self, text: str) -> None:
        self.notes.append(text)


SPAWNED: list[Any] = []  # the controller's background work (remembering), awaited by _done


def _controller(tmp_path: Path) -> tuple[SessionController, RecordingBridge, Notes]:
    bridge = RecordingBridge()
    SPAWNED.clear()  # an earlier test's tasks belong to its own, closed, event loop

    def spawn(coro: Any) -> None:
        SPAWNED.append(asyncio.ensure_future(coro))

    controller = SessionController(bridge, None, Config(), tmp_path, spawn)  # type: ignore[arg-type]
    notes = Notes()
    controller.listen(notes)
    return controller, bridge, notes


async def _done() -> None:
    while SPAWNED:
        await SPAWNED.pop()


def test_the_window_measures_only_what_nobody_chose(tmp_path: Path):
    async def main() -> None:
        controller, bridge, notes = _controller(tmp_path)
        model = await controller.open(STREAMED)
        assert bridge.measured == [True] and model is not None
        assert controller.config.n_threads == 2  # the measured count is the one in force
        assert notes.notes == [f"Threads: {MEASURED.describe()}."]  # the status bar's note
        await _done()
        # Measured, not chosen: not remembered as a choice, so measured again next time.
        assert "n_threads" not in model_settings.load_remembered(tmp_path).get(MODEL, {})
        await controller.open(STREAMED.replace(moe_stream=False))
        assert bridge.measured[-1] is False  # resident: nothing to measure
        await controller.open(STREAMED, threads_chosen=True)  # edited in the picker
        assert bridge.measured[-1] is False
        await _done()
        assert model_settings.load_remembered(tmp_path)[MODEL]["n_threads"] == 4
        # Remembered as a choice: the next open keeps it too, whoever asks.
        await controller.open(STREAMED, threads_chosen=False)
        assert bridge.measured[-1] is False

    asyncio.run(main())


def test_a_count_typed_at_start_or_changed_in_the_panel_is_kept(tmp_path: Path):
    async def main() -> None:
        controller, bridge, _ = _controller(tmp_path)
        controller.threads_chosen = True  # `window -t 4` (qt_app.main sets it)
        await controller.open(STREAMED)
        assert bridge.measured == [False]
        controller, bridge, _ = _controller(tmp_path / "other")
        await controller.open(STREAMED)
        assert bridge.measured == [True]
        # The panel: a cache change reopens and measures again; a thread change is a choice.
        await controller.apply(controller.config.replace(cache_mb=128))
        assert bridge.measured[-1] is True
        await controller.apply(controller.config.replace(n_threads=1))
        assert bridge.measured[-1] is False and controller.config.n_threads == 1
        await controller.apply(controller.config.replace(cache_mb=32))
        assert bridge.measured[-1] is False  # still the user's count

    asyncio.run(main())


def test_a_slow_older_save_does_not_undo_a_newer_choice(tmp_path: Path, monkeypatch):
    """Two opens in a row save the remembered settings twice, on executor threads. The first
    save (thread count measured: left out) is slowed so that, unordered, it finishes last and
    the choice made in the second open is lost (the CI failure of stop 44)."""
    real_save = model_settings.save_remembered
    saves: list[bool] = []

    def save(data: Path, remembered: Any) -> None:
        first = not saves
        saves.append(True)
        if first:
            time.sleep(0.3)
        real_save(data, remembered)

    monkeypatch.setattr(model_settings, "save_remembered", save)

    async def main() -> None:
        controller, _, _ = _controller(tmp_path)
        await controller.open(STREAMED)  # measured: not remembered
        await controller.open(STREAMED, threads_chosen=True)  # a choice: remembered
        await _done()
        assert len(saves) == 2
        assert model_settings.load_remembered(tmp_path)[MODEL]["n_threads"] == 4

    asyncio.run(main())
