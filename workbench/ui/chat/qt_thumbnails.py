"""Image thumbnails for the composer and the sent messages; a click opens the image larger.

Decoding: an image of up to SYNC_BYTES is decoded on the UI thread (a fraction of a
millisecond at thumbnail size); a larger one on a worker thread, with QImageReader's scaled
decode (QImage is safe to make off the UI thread; only the QPixmap is made on it). Until then
the thumbnail says "loading…", and a file Qt cannot decode says so instead of a picture.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QObject, QSize, Qt, Signal
from PySide6.QtGui import QImage, QImageReader, QMouseEvent, QPixmap
from PySide6.QtWidgets import QDialog, QLabel, QScrollArea, QVBoxLayout, QWidget

from workbench.ui.qt_flow_layout import QtFlowLayout

THUMB_PX = 72
VIEW_PX = 720
SYNC_BYTES = 512 << 10


def decode_scaled(data: bytes, side: int) -> QImage:
    """The image scaled to fit `side` px (never enlarged); a null QImage when Qt cannot read
    it. Safe on any thread."""
    buffer = QBuffer()
    buffer.setData(QByteArray(data))
    buffer.open(QIODevice.OpenModeFlag.ReadOnly)
    reader = QImageReader(buffer)
    size = reader.size()
    if size.isValid() and max(size.width(), size.height()) > side:
        reader.setScaledSize(size.scaled(QSize(side, side), Qt.AspectRatioMode.KeepAspectRatio))
    return reader.read()


class _Decoded(QObject):
    ready = Signal(QImage)


class QtThumbnail(QLabel):
    """One image, small; click (or Enter) to see it larger."""

    def __init__(self, data: bytes, name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.data, self.name = data, name
        self.setFixedSize(THUMB_PX, THUMB_PX)
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setToolTip(f"{name or 'image'}: click to view")
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setStyleSheet("border: 1px solid #999;")
        self.decoded = False
        self._signal = _Decoded(self)
        self._signal.ready.connect(self._show)
        if len(data) <= SYNC_BYTES:
            self._show(decode_scaled(data, THUMB_PX))
        else:
            self.setText("loading…")
            threading.Thread(target=lambda: self._signal.ready.emit(
                decode_scaled(data, THUMB_PX)), name="thumbnail", daemon=True).start()

    def _show(self, image: QImage) -> None:
        self.decoded = True
        if image.isNull():
            self.setText("not an\nimage")
            return
        self.setPixmap(QPixmap.fromImage(image))

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self.open_viewer()
        super().mouseReleaseEvent(event)

    def open_viewer(self) -> QDialog:
        viewer = QtImageViewer(self.data, self.name, self.window())
        viewer.open()
        return viewer


class QtImageViewer(QDialog):
    """The image larger (up to VIEW_PX), scrollable, closed with Esc."""

    def __init__(self, data: bytes, name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(name or "Image")
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.picture = QLabel()
        self.picture.setAlignment(Qt.AlignmentFlag.AlignCenter)
        image = decode_scaled(data, VIEW_PX)
        if image.isNull():
            self.picture.setText("This file cannot be shown as an image.")
        else:
            self.picture.setPixmap(QPixmap.fromImage(image))
        area = QScrollArea()
        area.setWidget(self.picture)
        area.setWidgetResizable(True)
        layout = QVBoxLayout(self)
        layout.addWidget(area)
        self.resize(min(VIEW_PX, max(image.width(), 240)) + 40,
                    min(VIEW_PX, max(image.height(), 160)) + 40)


class QtThumbnailStrip(QWidget):
    """A wrapping row of thumbnails (hidden when empty)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._layout = QtFlowLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self.thumbnails: list[QtThumbnail] = []
        self.setVisible(False)

    def set_images(self, images: Sequence[tuple[bytes, str]]) -> None:
        for thumb in self.thumbnails:
            self._layout.removeWidget(thumb)
            thumb.deleteLater()
        self.thumbnails = [QtThumbnail(data, name, self) for data, name in images]
        for thumb in self.thumbnails:
            self._layout.addWidget(thumb)
        self.setVisible(bool(self.thumbnails))
