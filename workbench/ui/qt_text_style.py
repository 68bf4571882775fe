"""Colour and weight for a widget's text without a style sheet.

A style sheet on a widget hands it and every child to Qt's style-sheet engine, which polishes
and paints them several times slower; a message widget built with six of them took twice as
long to appear. Widgets made per message use this instead.

Secondary text (hints, readouts, "nothing here yet" messages) is `dim_text`: it names a palette
role rather than a colour. A fixed grey reads on one theme only (#555 vanishes on the dark
window, #999 on the light one), and a colour copied into the widget's palette would stay behind
when View > Theme swaps the application palette; a role is looked up in whatever palette is in
force when the text is painted.
"""

from __future__ import annotations

from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QWidget

# Each theme dims its own placeholder text to read on its own window (qt_theme.dark_palette;
# Qt's standard palette for light), which is what secondary text needs too.
DIM_ROLE = QPalette.ColorRole.PlaceholderText
SMALL_PX = 11
ERROR_COLOUR = "#b00020"


def style_text(widget: QWidget, colour: str, *, pixel_size: int = 0, bold: bool = False,
               italic: bool = False) -> None:
    palette = widget.palette()
    for role in (QPalette.ColorRole.WindowText, QPalette.ColorRole.Text):
        palette.setColor(role, QColor(colour))
    widget.setPalette(palette)
    _set_font(widget, pixel_size, bold, italic)


def dim_text(widget: QWidget, *, pixel_size: int = 0, bold: bool = False,
             italic: bool = False) -> None:
    """Secondary text in the theme's dim colour, following a theme switch."""
    widget.setForegroundRole(DIM_ROLE)
    _set_font(widget, pixel_size, bold, italic)


def status_text(widget: QWidget, error: bool) -> None:
    """A status line: an error in red, anything else as secondary text."""
    if error:
        style_text(widget, ERROR_COLOUR)
        widget.setForegroundRole(QPalette.ColorRole.WindowText)  # the red, not the dim role
    else:
        dim_text(widget)


def _set_font(widget: QWidget, pixel_size: int, bold: bool, italic: bool) -> None:
    if pixel_size or bold or italic:
        font = widget.font()
        if pixel_size:
            font.setPixelSize(pixel_size)
        font.setBold(bold)
        font.setItalic(italic)
        widget.setFont(font)
