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
so the colour comes from the theme's `Tones` (qt_theme.py) and is set again whenever the
widget's palette changes, which View > Theme causes for every widget (see `_ToneFilter`).
"""

from __future__ import annotations

from typing import Literal

import shiboken6
from PySide6.QtCore import QCoreApplication, QEvent, QObject
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QWidget

from workbench.ui.qt_theme import tones

# Each theme dims its own placeholder text to read on its own window (qt_theme.dark_palette;
# Qt's standard palette for light), which is what secondary text needs too.
DIM_ROLE = QPalette.ColorRole.PlaceholderText
SMALL_PX = 11
Tone = Literal["error", "warning"]
_TONE_PROPERTY = "workbenchTextTone"
_TEXT_ROLES = (QPalette.ColorRole.WindowText, QPalette.ColorRole.Text)


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
        if widget.property(_TONE_PROPERTY):
            widget.setProperty(_TONE_PROPERTY, "")
            widget.removeEventFilter(_tone_filter())
            widget.setPalette(_without_text_colour(widget.palette()))
    else:
        if not widget.property(_TONE_PROPERTY):
            widget.installEventFilter(_tone_filter())
        widget.setProperty(_TONE_PROPERTY, tone)
        widget.setForegroundRole(QPalette.ColorRole.WindowText)  # the tone, not a dim role
        _paint_tone(widget)
    _set_font(widget, pixel_size, bold, italic)


def status_text(widget: QWidget, error: bool) -> None:
    """A status line: an error in the theme's error colour, anything else as secondary text."""
    if error:
        tone_text(widget, "error")
    else:
        tone_text(widget, None)
        dim_text(widget)


class _ToneFilter(QObject):
    """Sets a toned widget's colour again when its palette changes.

    Why not a palette role: Qt has none for errors, and borrowing one the themes would set
    (BrightText, Accent, ToolTipText...) changes what Fusion paints with it elsewhere, needs two
    (error and warning), and is lost under any palette not made by apply_theme. A palette
    change reaches every widget whichever way the palette changed (View > Theme, the desktop's
    scheme), so the widget asks the theme then. One filter serves every toned widget, and it
    does nothing unless the colour is wrong, so the palette it sets does not loop back here.
    """

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if (event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange)
                and isinstance(watched, QWidget)):
            _paint_tone(watched)
        return False


_filter: _ToneFilter | None = None


def _tone_filter() -> _ToneFilter:
    """The one filter, owned by the application (a new application gets a new filter)."""
    global _filter
    if _filter is None or not shiboken6.isValid(_filter):
        _filter = _ToneFilter(QCoreApplication.instance())
    return _filter


def _paint_tone(widget: QWidget) -> None:
    tone = widget.property(_TONE_PROPERTY)
    if tone:
        colour = QColor(getattr(tones(), tone))
        if widget.palette().color(QPalette.ColorRole.WindowText) != colour:
            _set_text_colour(widget, colour)


def _set_text_colour(widget: QWidget, colour: QColor) -> None:
    palette = widget.palette()
    for role in _TEXT_ROLES:
        palette.setColor(role, colour)
    widget.setPalette(palette)


def _without_text_colour(palette: QPalette) -> QPalette:
    """`palette` with its text roles unset, so the widget inherits them again. Which bits of
    the resolve mask they are is Qt's business: ask a palette with only them set."""
    probe = QPalette()
    for role in _TEXT_ROLES:
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
