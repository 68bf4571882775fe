"""The composer under the chat: the prompt box, Send/Stop, the Thinking switch, the context gauge.

Enter sends and Shift+Enter starts a new line. While an answer streams the button reads "Stop"
and, after a click, "Stopping…" until the engine confirms. The line under the prompt wraps
(a flow, its notes word-wrapped) so that a narrow chat column never widens the window.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path

from PySide6.QtCore import QEvent, QMimeData, QObject, Qt, Signal
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent, QKeyEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QFileDialog,
    QHBoxLayout,
    QPlainTextEdit,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from workbench.engine.images import ImageInput, ImageInputError, read_attachment
from workbench.engine.requests import Forecast
from workbench.ui.chat.qt_context_gauge import QtContextGauge
from workbench.ui.chat.qt_thumbnails import QtThumbnailStrip
from workbench.ui.chat.stats_line import forecast_text, forecast_warning
from workbench.ui.qt_flow_layout import QtFlowLayout
from workbench.ui.qt_plain_label import plain_label
from workbench.ui.qt_text_style import SMALL_PX, dim_text, tone_text

IMAGE_FILTER = "Images (*.png *.jpg *.jpeg *.webp *.gif *.bmp);;All files (*)"
NO_PROJECTOR_HINT = (
    "This model cannot see images: it was opened without an image projector. Choose the "
    "model's mmproj file in the model picker (File > Open model…), then attach the image again.")


def _dropped_files(mime: QMimeData) -> list[Path]:
    return [Path(u.toLocalFile()) for u in mime.urls() if u.isLocalFile()]


class _ReadDone(QObject):
    done = Signal(list, list)  # images, problems


class QtPromptEdit(QPlainTextEdit):
    submitted = Signal()
    escape = Signal()
    files_dropped = Signal(list)

    # Files dropped on the prompt are attachments, not their paths typed into the text.
    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if _dropped_files(event.mimeData()):
            event.acceptProposedAction()
            return
        super().dragEnterEvent(event)

    def dragMoveEvent(self, event: QDragMoveEvent) -> None:
        if _dropped_files(event.mimeData()):
            event.acceptProposedAction()
            return
        super().dragMoveEvent(event)

    def dropEvent(self, event: QDropEvent) -> None:
        files = _dropped_files(event.mimeData())
        if files:
            event.acceptProposedAction()
            self.files_dropped.emit(files)
            return
        super().dropEvent(event)

    def event(self, event: QEvent) -> bool:
        # Esc is this box's (stop, or cancel an inline edit) before the window's Esc shortcut.
        if (event.type() == QEvent.Type.ShortcutOverride
                and event.key() == Qt.Key.Key_Escape):  # type: ignore[attr-defined]
            event.accept()
            return True
        return super().event(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Escape:
            self.escape.emit()
            return
        enter = event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
        if enter and not event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            self.submitted.emit()
            return
        super().keyPressEvent(event)


class QtComposer(QWidget):
    send_requested = Signal(str)
    stop_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.prompt = QtPromptEdit()
        self.prompt.setPlaceholderText("Message the model (Enter sends, Shift+Enter: new line)")
        self.prompt.setMaximumHeight(110)
        self.prompt.submitted.connect(self._submit)
        self.prompt.escape.connect(self.stop_requested)
        self.prompt.files_dropped.connect(self.attach_files)
        self.setAcceptDrops(True)
        self.attach_button = QToolButton()
        self.attach_button.setText("Image…")
        self.attach_button.setToolTip("Attach an image (or drop image files on the message box)")
        self.attach_button.clicked.connect(self._choose_images)
        self.clear_images = QToolButton()
        self.clear_images.setText("×")
        self.clear_images.setToolTip("Remove the attached images")
        self.clear_images.clicked.connect(lambda: self.set_attachments([]))
        self.thumbnails = QtThumbnailStrip()
        self.attachments: list[ImageInput] = []
        self.sees_images = False
        self.reading = 0  # attach_files reads in flight
        self._read = _ReadDone(self)
        self._read.done.connect(self._attached)
        self.button = QPushButton("Send")
        self.button.setMinimumWidth(90)
        self.button.clicked.connect(self._clicked)
        self.think = QCheckBox("Thinking")
        self.think_note = plain_label()
        dim_text(self.think_note, pixel_size=SMALL_PX)
        self.think_note.setWordWrap(True)
        self.gauge = QtContextGauge()
        self.hint = plain_label()
        dim_text(self.hint, pixel_size=SMALL_PX)
        self.hint.setWordWrap(True)
        # What the draft would cost to read before its first token, updated as the user types.
        self.forecast = plain_label()
        dim_text(self.forecast, pixel_size=SMALL_PX)
        row = QHBoxLayout()
        row.addWidget(self.prompt, 1)
        row.addWidget(self.button, 0, Qt.AlignmentFlag.AlignBottom)
        under = QtFlowLayout()
        under.addWidget(self.attach_button)
        under.addWidget(self.think)
        under.addWidget(self.think_note)
        under.add_stretch()
        under.addWidget(self.forecast)
        under.addWidget(self.hint)
        under.addWidget(self.gauge)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 4, 8, 8)
        images_row = QHBoxLayout()
        images_row.addWidget(self.thumbnails, 1)
        images_row.addWidget(self.clear_images, 0, Qt.AlignmentFlag.AlignTop)
        self.clear_images.setVisible(False)
        layout.addLayout(images_row)
        layout.addLayout(row)
        layout.addLayout(under)
        self._busy = False
        self._ready = False
        self.set_ready(False)

    @property
    def busy(self) -> bool:
        return self._busy

    def set_ready(self, ready: bool, why: str = "") -> None:
        """Whether a model is loaded; `why` says what to do when not."""
        self._ready = ready
        self.button.setEnabled(ready or self._busy)
        self.hint.setText("" if ready else why)

    def set_busy(self, busy: bool) -> None:
        self._busy = busy
        self.button.setText("Stop" if busy else "Send")
        self.button.setToolTip("Stop the answer (Esc)" if busy else "Send (Enter)")
        self.button.setEnabled(busy or self._ready)

    def set_stopping(self) -> None:
        self.button.setText("Stopping…")
        self.button.setEnabled(False)

    def show_forecast(self, forecast: Forecast | None) -> None:
        """The draft's cost, or (in the warning colour) why it will not fit the context."""
        warning = forecast_warning(forecast) if forecast is not None else ""
        self.forecast.setWordWrap(bool(warning))
        if warning:
            tone_text(self.forecast, "warning", pixel_size=SMALL_PX)
        else:
            tone_text(self.forecast, None)
            dim_text(self.forecast, pixel_size=SMALL_PX)
        self.forecast.setText(warning or (forecast_text(forecast) if forecast else ""))

    def set_think_control(self, control: str, note: str, default_on: bool) -> None:
        """"none": the template cannot turn thinking off, so the switch reads on, disabled."""
        self.think.setEnabled(control != "none")
        self.think.setChecked(True if control == "none" else default_on)
        self.think_note.setText(note)

    def show_no_thinking(self, note: str) -> None:
        """A model that cannot reason (or raw text): the switch off, disabled, and why."""
        self.think.setEnabled(False)
        self.think.setChecked(False)
        self.think_note.setText(note)

    # ---- images ---------------------------------------------------------------------------------

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if _dropped_files(event.mimeData()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        files = _dropped_files(event.mimeData())
        if files:
            event.acceptProposedAction()
            self.attach_files(files)

    def set_sees_images(self, sees: bool) -> None:
        """Whether the open model has an image projector (attachments are refused without)."""
        self.sees_images = sees

    def _choose_images(self) -> None:
        paths, _ = QFileDialog.getOpenFileNames(self, "Attach images", "", IMAGE_FILTER)
        self.attach_files([Path(p) for p in paths])

    def attach_files(self, paths: Iterable[Path]) -> None:
        """Read and attach image files, off the UI thread (a file may sit on a slow disk);
        what cannot be attached is said in the hint line. `reading` is True meanwhile."""
        paths = list(paths)
        if not paths:
            return
        if not self.sees_images:
            self.hint.setText(NO_PROJECTOR_HINT)
            return
        self.reading += 1

        def read() -> None:
            images, problems = [], []
            for path in paths:
                try:
                    images.append(read_attachment(path))
                except ImageInputError as exc:
                    problems.append(str(exc))
            self._read.done.emit(images, problems)  # queued to the UI thread

        threading.Thread(target=read, name="attach", daemon=True).start()

    def _attached(self, images: list[ImageInput], problems: list[str]) -> None:
        self.reading -= 1
        added = list(self.attachments)
        for image in images:
            if all(a.sha256 != image.sha256 for a in added):
                added.append(image)
        self.set_attachments(added)
        self.hint.setText("; ".join(problems))

    def set_attachments(self, images: list[ImageInput]) -> None:
        self.attachments = list(images)
        self.thumbnails.set_images([(i.data, i.name) for i in self.attachments])
        self.clear_images.setVisible(bool(self.attachments))

    def _clicked(self) -> None:
        if self._busy:
            self.stop_requested.emit()
        else:
            self._submit()

    def _submit(self) -> None:
        if self._busy or not self._ready:
            return
        text = self.prompt.toPlainText().strip()
        if not text:
            return
        # The text stays in the box until it is stored (`clear_sent`): if saving fails, the
        # user still has what they typed.
        self.send_requested.emit(text)

    def clear_sent(self, text: str) -> None:
        """The message `text` is stored: clear the box, unless the user already typed on."""
        if self.prompt.toPlainText().strip() == text:
            self.prompt.clear()
        self.set_attachments([])
