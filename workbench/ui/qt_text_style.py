"""Colour and weight for a widget's text without a style sheet.

A style sheet on a widget hands it and every child to Qt's style-sheet engine, which polishes
and paints them several times slower; a message widget built with six of them took twice as
long to appear. Widgets made per message use this instead.

Secondary text (hints, readouts, "nothing here yet" messages) is `dim_text`: it names a palette
role rather than a colour. A fixed grey reads on one theme only (#555 vanishes on the dark
window, #999 on the light one), and a colour copied into the widget's palette would stay behind
when View > Theme swaps the application palette; a role is looked up in whatever palette is in
force when the text is painted.

Text that means something (an error, a warning) is `tone_text`. Qt has no palette role for it,
and borrowing one the themes set (BrightText, Accent, ToolTipText...) would change what Fusion
paints with it elsewhere, and there are two. So the widget is marked with its tone, takes the
colour from the theme's `Tones` (qt_theme.py), and `apply_theme` gives every marked widget the
new theme's colour when the theme changes.
"""

from __future__ import annotations

from typing import Literal

from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QWidget

from workbench.ui.qt_theme import TEXT_ROLES, TONE_PROPERTY, paint_tone

# Each theme dims its own placeholder text to read on its own window (qt_theme.dark_palette;
# Qt's standard palette for light), which is what secondary text needs too.
DIM_ROLE = QPalette.ColorRole.PlaceholderText
SMALL_PX = 11
Tone = Literal["error", "warning"]


def style_text(widget: QWidget, colour: str, *, pixel_size: int = 0, bold: bool = False,
               italic: bool = False) -> None:
    _set_text_colour(widget, QColor(colour))
    _set_font(widget, pixel_size, bold, italic)


def dim_text(widget: QWidget, *, pixel_size: int = 0, bold: bool = False,
             italic: bool = False) -> None:
    """Secondary text in the theme's dim colour, following a theme switch."""
    widget.setForegroundRole(DIM_ROLE)
    _set_font(widget, pixel_size, bold, italic)


def tone_text(widget: QWidget, tone: Tone | None, *, pixel_size: int = 0, bold: bool = False,
              italic: bool = False) -> None:
    """Text in the theme's colour for `tone`, following a theme switch; None puts the palette's
    own text colour back (a label that shows an error only sometimes)."""
    if tone is None:
        if widget.property(TONE_PROPERTY):
            widget.setProperty(TONE_PROPERTY, "")
            widget.setPalette(_without_text_colour(widget.palette()))
    else:
        widget.setProperty(TONE_PROPERTY, tone)
        widget.setForegroundRole(QPalette.ColorRole.WindowText)  # the tone, not a dim role
        paint_tone(widget)
    _set_font(widget, pixel_size, bold, italic)


def status_text(widget: QWidget, error: bool) -> None:
    """A status line: an error in the theme's error colour, anything else as secondary text."""
    if error:
        tone_text(widget, "error")
    else:
        tone_text(widget, None)
        dim_text(widget)


def _set_text_colour(widget: QWidget, colour: QColor) -> None:
    palette = widget.palette()
    for role in TEXT_ROLES:
        palette.setColor(role, colour)
    widget.setPalette(palette)


def _without_text_colour(palette: QPalette) -> QPalette:
    """`palette` with its text roles unset, so the widget inherits them again. Which bits of
    the resolve mask they are is Qt's business: ask a palette with only them set."""
    probe = QPalette()
    for role in TEXT_ROLES:
        probe.setColor(role, QColor())
    cleared = QPalette(palette)
    cleared.setResolveMask(palette.resolveMask() & ~probe.resolveMask())
    return cleared


def _set_font(widget: QWidget, pixel_size: int, bold: bool, italic: bool) -> None:
    if pixel_size or bold or italic:
        font = widget.font()
        if pixel_size:
            font.setPixelSize(pixel_size)
        font.setBold(bold)
        font.setItalic(italic)
        widget.setFont(font)
