"""Render the window after a real chat: the README's pictures, made by the app itself."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt
from PySide6.QtWidgets import QApplication

from workbench.atomic_write import check_output_path, write_bytes_atomic
from workbench.ui.qt_main_window import QtMainWindow


async def chat(window: QtMainWindow, prompts: Sequence[str], images: Sequence[Path] = ()
               ) -> None:
    """A new conversation with these prompts, each answered in full; `images` go with the
    first (attached through the composer, as a user attaches them)."""
    await window.conversations.open(None)
    for i, prompt in enumerate(prompts):
        if i == 0 and images:
            window.composer.attach_files(images)
            while window.composer.reading:
                await asyncio.sleep(0.05)
            if len(window.composer.attachments) != len(images):
                raise RuntimeError(f"the images could not be attached: "
                                   f"{window.composer.hint.text()}")
        await window.chat.send(prompt)


async def settle(window: QtMainWindow) -> None:
    """Let timers render pending text and plots, and layouts settle."""
    for _ in range(3):
        await asyncio.sleep(0.15)
        QApplication.processEvents()
    for widget in window.chat_view.messages:
        widget.flush()
    window.telemetry.repaint()
    window.telemetry.headline_row.show_headline(window.telemetry.headline.value)
    if window.expert_map.streaming:
        window.expert_map.repaint_map()


async def take_screenshot(window: QtMainWindow, out: Path, chats: Sequence[Sequence[str]],
                          size: tuple[int, int], front: str = "telemetry",
                          images: Sequence[Path] = ()) -> None:
    """`front` names the right-hand dock shown in front: "telemetry" or "experts".

    `out` is written whole or not at all (its directory must exist): an OutputFileError says
    why it was not."""
    check_output_path(out)  # before the chats, not a minute later
    window.resize(*size)
    if window.chat.model is None:
        raise RuntimeError("no model loaded; the screenshot needs a real chat")
    for n, prompts in enumerate(chats):
        await chat(window, prompts, images if n == len(chats) - 1 else ())
    await window.conversations.refresh()
    last = window.chat_view.messages[-1]
    # Show both links between the answer and the plots: a token highlighted on every plot,
    # and a span selected on the plots, marked in the answer's token view.
    x0 = last.shown.stats.x_start
    n = last.shown.stats.n_generated or 0
    if x0 is not None:
        if n > 12:
            window.telemetry.select_span(x0 + n // 4, x0 + n // 2)
        window.telemetry.highlight(x0 + 5)
    if front == "experts":
        window.expert_dock.raise_()
    await settle(window)
    window.chat_view.follow_tail()
    await settle(window)
    pixmap = window.grab()
    if pixmap.width() > 1600:
        pixmap = pixmap.scaledToWidth(1600, Qt.TransformationMode.SmoothTransformation)
    # Encoded in memory, then written off the UI thread, whole or not at all: QPixmap.save
    # would block the loop, and its False on a full disk says nothing of why.
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    if not pixmap.save(buffer, "PNG"):
        raise OSError(f"{out} was not written: the window could not be encoded as PNG")
    png = bytes(data.data())
    await asyncio.get_running_loop().run_in_executor(None, write_bytes_atomic, out, png)
