"""Colour and weight for a widget's text without a style sheet.

A style sheet on a widget hands it and every child to Qt's style-sheet engine, which polishes
and paints them several times slower; a message widget built with six of them took twice as
long to appear. Widgets made per message use this instead.
"""

from __future__ import annotations

from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QWidget


def style_text(widget: QWidget, colour: str, *, pixel_size: int = 0, bold: bool = False,
               italic: bool = False) -> None:
    palette = widget.palette()
    for role in (QPalette.ColorRole.WindowText, QPalette.ColorRole.Text):
        palette.setColor(role, QColor(colour))
    widget.setPalette(palette)
    if pixel_size or bold or italic:
        font = widget.font()
        if pixel_size:
            font.setPixelSize(pixel_size)
        font.setBold(bold)
        font.setItalic(italic)
        widget.setFont(font)
