"""Light and dark themes for the whole window, and the plots' colours that go with them.

The dark theme is Qt's Fusion style with a dark palette (Fusion draws every widget from the
palette, so one palette recolours the window). "system" follows the desktop's colour scheme
(`QStyleHints.colorScheme`, Qt 6.5+) and changes with it; where the desktop does not say
(offscreen, plain X11), it is light. Widgets that paint their own tints ask `is_dark()`.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication, QStyleFactory, QWidget

from workbench.ui.window_memory import THEMES


@dataclass(frozen=True, slots=True)
class PlotColours:
    background: str
    foreground: str  # axes, ticks, titles
    ink: str  # a curve drawn "in black" on light (the wall time)
    grid: str  # the dashed turn boundaries
    legend: tuple[int, int, int, int]  # the legends' backdrop, RGBA
    dim: str  # "no data" over an empty plot: secondary, yet 4.5:1 on the background


LIGHT_PLOTS = PlotColours("#ffffff", "#444444", "#222222", "#bbbbbb", (255, 255, 255, 190),
                          "#757575")
DARK_PLOTS = PlotColours("#1e1f22", "#c8c8c8", "#e6e6e6", "#5a5a5a", (30, 31, 34, 190),
                         "#8c8c8c")
LIGHT_INK = "#222222"  # the colour series.py gives the curve that DARK_PLOTS.ink replaces


@dataclass(frozen=True, slots=True)
class Tones:
    """Text that means something (an error, a warning or note), and the notice bar's fills.

    Each theme has its own: the light theme's deep red is 1.9:1 on the dark window, and a red
    bright enough for the dark window is 2.2:1 on the light one. Every text colour is >= 4.5:1
    on its theme's window and base (tests/ui/test_theme_contrast.py).
    """

    error: str
    warning: str  # also notes: "reopens the model", a setting's reason to be off, "stopped"
    error_fill: str  # the notice bar's background and border; its text stays WindowText
    error_edge: str
    info_fill: str
    info_edge: str


LIGHT_TONES = Tones("#b00020", "#8a5a00", "#fdecea", "#f5c2c0", "#eef5ee", "#c5dec5")
DARK_TONES = Tones("#ff7b7b", "#e0b050", "#4a2a2d", "#7a3e40", "#26382a", "#3f6145")


@dataclass(frozen=True, slots=True)
class CellTints:
    """Highlighted table cells (the compare view's changed settings, better and worse ratios).

    A cell sets its text colour together with its fill, so each pair reads (>= 4.5:1) whatever
    palette is in force: the light pastels under the dark theme's light text were 1.2:1.
    """

    text: str
    changed: str
    better: str
    worse: str


LIGHT_CELLS = CellTints("#1a1a1a", "#fff3cd", "#dff0d8", "#f8d7da")
DARK_CELLS = CellTints("#f0f0f0", "#574714", "#1f4d2b", "#66262e")


def resolve(choice: str) -> str:
    """"light" or "dark" for a theme choice."""
    if choice not in THEMES:
        raise ValueError(f"unknown theme {choice!r}: one of {', '.join(THEMES)}")
    if choice != "system":
        return choice
    scheme = QGuiApplication.styleHints().colorScheme()
    return "dark" if scheme == Qt.ColorScheme.Dark else "light"


def dark_palette() -> QPalette:
    p = QPalette()
    window, base, text = QColor(45, 45, 48), QColor(30, 31, 34), QColor(225, 225, 225)
    role = QPalette.ColorRole
    for r, c in ((role.Window, window), (role.WindowText, text), (role.Base, base),
                 (role.AlternateBase, QColor(40, 42, 46)), (role.ToolTipBase, window),
                 (role.ToolTipText, text), (role.Text, text), (role.Button, window),
                 (role.ButtonText, text), (role.BrightText, QColor(255, 80, 80)),
                 (role.Link, QColor(110, 170, 255)), (role.Highlight, QColor(60, 110, 190)),
                 (role.HighlightedText, QColor(255, 255, 255)),
                 (role.PlaceholderText, QColor(140, 140, 140)), (role.Mid, QColor(70, 70, 74)),
                 (role.Dark, QColor(25, 25, 27)), (role.Light, QColor(75, 75, 80))):
        p.setColor(r, c)
    grey = QColor(130, 130, 130)
    for r in (role.WindowText, role.Text, role.ButtonText):
        p.setColor(QPalette.ColorGroup.Disabled, r, grey)
    return p


def apply_theme(choice: str) -> str:
    """Recolour the application; returns "light" or "dark"."""
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    resolved = resolve(choice)
    # Dark needs Fusion (a platform style may ignore the palette); light keeps the desktop's.
    if resolved == "dark" and app.style().name().lower() != "fusion":
        app.setStyle(QStyleFactory.create("Fusion"))
    app.setPalette(dark_palette() if resolved == "dark" else app.style().standardPalette())
    # A toned widget set its text colour itself, so the new palette left it alone: give it the
    # new theme's. Every theme change comes through here (View > Theme, the desktop's scheme),
    # so this one pass replaces a watcher on each toned label's every event.
    for widget in app.allWidgets():
        paint_tone(widget)
    return resolved


def is_dark() -> bool:
    """The palette in force is dark (whatever chose it)."""
    return QGuiApplication.palette().color(QPalette.ColorRole.Window).lightness() < 128


def plot_colours() -> PlotColours:
    return DARK_PLOTS if is_dark() else LIGHT_PLOTS


def tones() -> Tones:
    return DARK_TONES if is_dark() else LIGHT_TONES


def cell_tints() -> CellTints:
    return DARK_CELLS if is_dark() else LIGHT_CELLS


TONE_PROPERTY = "workbenchTextTone"  # "error" or "warning": the widget's text is in that tone
TEXT_ROLES = (QPalette.ColorRole.WindowText, QPalette.ColorRole.Text)


def paint_tone(widget: QWidget) -> None:
    """Sets a toned widget's text to its tone in the theme in force (nothing for the others)."""
    tone = widget.property(TONE_PROPERTY)
    if not tone:
        return
    colour = QColor(getattr(tones(), tone))
    palette = widget.palette()
    if palette.color(QPalette.ColorRole.WindowText) != colour:
        for role in TEXT_ROLES:
            palette.setColor(role, colour)
        widget.setPalette(palette)
