"""Secondary text reads on both themes: every hint, readout and "nothing yet" message that used to
be a fixed grey has at least 3:1 contrast (WCAG's floor for large or secondary text) against
what it is drawn on, in light and in dark, and after switching between them at run time.
Errors and warnings, which used to be fixed dark reds and browns, reach 4.5:1 (WCAG's floor for
body text) the same way, and so does the notice bar's text on its fill.

The colours are the ones Qt paints with: the label's foreground role looked up in its palette
(a style sheet's `color:` lands there too), composited over its background role.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication, QLabel, QWidget

from workbench.config import Config
from workbench.ui.chat.qt_chat_view import QtChatView
from workbench.ui.chat.qt_composer import QtComposer
from workbench.ui.chat.qt_message_widget import QtMessageWidget
from workbench.ui.chat.shown import ShownMessage
from workbench.ui.models import qt_model_picker
from workbench.ui.models.qt_model_picker import QtModelPicker
from workbench.ui.qt_notice_bar import QtNoticeBar
from workbench.ui.qt_theme import apply_theme, plot_colours
from workbench.ui.runs.qt_matrix_dialog import QtMatrixDialog
from workbench.ui.runs.qt_runs_page import QtRunsPage
from workbench.ui.settings.preset_store import PresetStore
from workbench.ui.settings.qt_presets_box import QtPresetsBox
from workbench.ui.settings.qt_settings_panel import QtSettingsPanel
from workbench.ui.telemetry.qt_cache_sizing import QtCacheSizing
from workbench.ui.telemetry.qt_expert_map import QtExpertMap
from workbench.ui.telemetry.qt_telemetry_panel import QtTelemetryPanel
from workbench.ui.ui_pacer import UiPacer

MIN_CONTRAST = 3.0
TONE_CONTRAST = 4.5
WAIT = 10_000


def luminance(colour: QColor) -> float:
    def channel(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    return (0.2126 * channel(colour.redF()) + 0.7152 * channel(colour.greenF())
            + 0.0722 * channel(colour.blueF()))


def over(fg: QColor, bg: QColor) -> QColor:
    """`fg` as painted on `bg` (Qt's light placeholder text is half-transparent black)."""
    a = fg.alphaF()
    return QColor.fromRgbF(*(a * f + (1 - a) * b for f, b in (
        (fg.redF(), bg.redF()), (fg.greenF(), bg.greenF()), (fg.blueF(), bg.blueF()))))


def contrast(fg: QColor, bg: QColor) -> float:
    lighter, darker = sorted((luminance(over(fg, bg)), luminance(bg)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def text_contrast(label: QWidget) -> float:
    palette = label.palette()
    return contrast(palette.color(label.foregroundRole()), palette.color(label.backgroundRole()))


async def no_store(_: Any) -> Any:
    raise AssertionError("the widgets under test do not touch the store")


@pytest.fixture
def restore_theme(qapp: QApplication) -> Iterator[None]:
    palette = QPalette(QGuiApplication.palette())
    yield
    qapp.setPalette(palette)


def dim_labels(qtbot: Any) -> tuple[dict[str, QLabel], list[QWidget]]:
    """Every label whose colour was a fixed grey, by where it is; and their widgets, which
    qtbot holds only weakly."""
    telemetry = QtTelemetryPanel(pacer=UiPacer(target_share=10.0))
    expert_map = QtExpertMap()
    sizing = QtCacheSizing()
    settings = QtSettingsPanel(Config())
    presets = QtPresetsBox(PresetStore(no_store), Config())
    runs = QtRunsPage(no_store, Config())
    chat_view, composer = QtChatView(), QtComposer()
    message = QtMessageWidget(ShownMessage(id=1, role="assistant", content="Hi"))
    for widget in (telemetry, expert_map, sizing, settings, presets, runs, chat_view, composer,
                   message):
        qtbot.addWidget(widget)
    presets.show_status("Saved preset 'x'.")
    runs.show_status("Compared 2 runs.")
    labels: dict[str, QLabel] = {
        "telemetry readout": telemetry.readout, "telemetry KV states": telemetry.kv_states,
        "expert map message": expert_map.message, "expert map readout": expert_map.readout,
        "expert map scale": expert_map.scale_label, "expert map zero": expert_map.scale_zero,
        "expert map residency": expert_map.residency_label,
        "cache sizing message": sizing.message, "cache sizing budget": sizing.budget_label,
        "cache sizing readout": sizing.readout, "presets status": presets.status,
        "runs status": runs.status, "compare methods": runs.compare_view.methods,
        "chat placeholder": chat_view.placeholder, "composer think note": composer.think_note,
        "composer hint": composer.hint, "composer forecast": composer.forecast,
        "message stats": message.stats,
    }
    labels |= {f"headline {name}": label
               for name, label in telemetry.headline_row.names.items()}
    labels |= {f"hint {name}": row.hint for name, row in settings.rows.items()}
    blurbs = [label for box in settings.groups.values() for label in box.findChildren(QLabel)
              if label.parent() is box and label.wordWrap()]
    assert blurbs
    labels |= {f"blurb {i}": label for i, label in enumerate(blurbs)}
    return labels, [telemetry, expert_map, sizing, settings, presets, runs, chat_view, composer,
                    message]


def test_secondary_text_reads_on_either_theme_and_follows_a_switch(qtbot, restore_theme):
    labels, widgets = dim_labels(qtbot)
    telemetry = widgets[0]
    assert isinstance(telemetry, QtTelemetryPanel)
    for theme in ("light", "dark", "light"):  # built under one, switched, switched back
        apply_theme(theme)
        QApplication.processEvents()
        poor = {name: round(text_contrast(label), 2) for name, label in labels.items()
                if text_contrast(label) < MIN_CONTRAST}
        assert not poor, f"{theme}: {poor}"
        # The "no data" over each empty plot, as the window recolours the plots on a switch.
        colours = plot_colours()
        telemetry.set_colours(colours)
        empties = telemetry._empty_labels.values()
        assert empties and all(contrast(item.color, QColor(colours.background)) >= MIN_CONTRAST
                               for item in empties), theme


def toned_labels(qtbot: Any, model: Path) -> tuple[dict[str, QLabel], list[QWidget]]:
    """Every error and warning label, made to show its error state; and their widgets."""
    settings = QtSettingsPanel(Config())
    row = next(iter(settings.rows.values()))
    row.set_inactive("Only used when the model has experts.")
    row.set_problems(["Must be at least 1."])
    presets = QtPresetsBox(PresetStore(no_store), Config())
    presets.show_status("Could not save the preset.", error=True)
    runs = QtRunsPage(no_store, Config())
    runs.show_status("Could not read the runs.", error=True)
    message = QtMessageWidget(ShownMessage(id=1, role="assistant", content="Hi", status="error",
                                           error="The model failed."))
    matrix = QtMatrixDialog([], Config())
    matrix._say("Failed: no prompts.", error=True)
    picker = QtModelPicker(Config(model=str(model)))
    widgets: list[QWidget] = [settings, presets, runs, message, matrix, picker]
    for widget in widgets:
        qtbot.addWidget(widget)
    qtbot.waitUntil(lambda: picker.scans_done == 1, timeout=WAIT)
    picker.select(str(model))
    qtbot.waitUntil(lambda: picker.estimate.text() != "", timeout=WAIT)
    assert message.badge.text() and message.note.text()
    return {
        "setting reason": row.reason, "setting problem": row.problem,
        "settings reopen note": settings.reopen_label, "presets error": presets.status,
        "runs error": runs.status, "message error": message.error, "message note": message.note,
        "message badge": message.badge, "matrix log error": matrix.log,
        "model picker estimate (does not fit)": picker.estimate,
    }, widgets


@pytest.mark.parametrize("built_under", ["light", "dark"])
def test_errors_and_warnings_read_on_either_theme_and_follow_a_switch(
        qtbot, restore_theme, aloop, monkeypatch, embedded_model_path, built_under):
    monkeypatch.setattr(qt_model_picker, "available_memory_mib", lambda: 1.0)  # nothing fits
    other = "dark" if built_under == "light" else "light"
    apply_theme(built_under)
    labels, widgets = toned_labels(qtbot, embedded_model_path)
    notice = QtNoticeBar()
    qtbot.addWidget(notice)
    notice.resize(480, 40)
    notice.show_error("The model would not load.", "Open another")
    matrix = widgets[4]
    assert isinstance(matrix, QtMatrixDialog)
    for theme in (built_under, other, built_under):
        apply_theme(theme)
        QApplication.processEvents()
        poor = {name: round(text_contrast(label), 2) for name, label in labels.items()
                if text_contrast(label) < TONE_CONTRAST}
        assert not poor, f"{theme}: {poor}"
        plain = QGuiApplication.palette().color(QPalette.ColorRole.WindowText)
        untoned = [name for name, label in labels.items()
                   if label.palette().color(label.foregroundRole()) == plain]
        assert not untoned, f"{theme}: not in their error state: {untoned}"
        # The bar's fill is a style sheet: take it from what the bar paints, inside its border.
        fill = notice.grab().toImage().pixelColor(3, 3)
        text = notice.label.palette().color(notice.label.foregroundRole())
        assert contrast(text, fill) >= TONE_CONTRAST, (theme, text.name(), fill.name())
    # Out of its error state, a label takes the theme's own text colour, and keeps following.
    matrix._say("Running…")
    apply_theme(other)
    QApplication.processEvents()
    assert (matrix.log.palette().color(matrix.log.foregroundRole())
            == QGuiApplication.palette().color(QPalette.ColorRole.WindowText))


def link_colour(view: Any) -> QColor:
    """The colour the chat paints its first link in."""
    block = view.document().begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            if fragment.charFormat().isAnchor():
                return fragment.charFormat().foreground().color()
            it += 1
        block = block.next()
    raise AssertionError(f"no link in {view.document().toPlainText()!r}")


def dominant(image: Any) -> QColor:
    """The colour most pixels of a screenshot have: what the widget is painted on."""
    from collections import Counter

    counts = Counter(image.pixel(x, y) for x in range(0, image.width(), 3)
                     for y in range(0, image.height(), 3))
    return QColor.fromRgb(counts.most_common(1)[0][0])


@pytest.mark.parametrize("built_under", ["light", "dark"])
def test_links_gauge_and_compare_plot_follow_the_theme(qtbot, restore_theme, built_under):
    """Issue 39: after a switch to dark, links in the chat stayed dark blue on dark grey and the
    compare plot stayed white (also when built under dark, as after a restart). Screenshots of
    each, in both themes and across a switch, read: text against what it is painted on."""
    from workbench.ui.chat.qt_context_gauge import QtContextGauge
    from workbench.ui.runs.qt_overlay_plot import QtOverlayPlot

    apply_theme(built_under)
    message = QtMessageWidget(ShownMessage(
        id=1, role="assistant", content="See [the guide](https://example.com/guide) first."))
    gauge, plot = QtContextGauge(), QtOverlayPlot()
    for widget, size in ((message, (420, 80)), (gauge, (240, 24)), (plot, (420, 260))):
        qtbot.addWidget(widget)
        widget.resize(*size)
        widget.show()
    gauge.set_usage(100, 512)
    other = "dark" if built_under == "light" else "light"
    for theme in (built_under, other, built_under):
        apply_theme(theme)
        QApplication.processEvents()
        dark = theme == "dark"
        # A link against the message's own background, as painted.
        behind = dominant(message.grab().toImage())
        assert (behind.lightness() < 128) == dark, (theme, behind.name())
        from workbench.ui.chat.qt_text_view import QtTextView

        link = link_colour(message.body.findChildren(QtTextView)[0])
        assert contrast(link, behind) >= TONE_CONTRAST, (theme, link.name(), behind.name())
        # The gauge: its groove is the theme's, its text reads on it.
        groove = gauge.grab().toImage().pixelColor(gauge.width() - 4, gauge.height() // 2)
        assert (groove.lightness() < 128) == dark, (theme, groove.name())
        assert contrast(gauge.palette().color(QPalette.ColorRole.Text), groove) >= TONE_CONTRAST
        # The compare plot: painted on the theme's plot background; its title and axes read.
        canvas = dominant(plot.plot.grab().toImage())
        assert (canvas.lightness() < 128) == dark, (theme, canvas.name())
        axis = plot.plot.getPlotItem().getAxis("left").textPen().color()
        assert contrast(axis, canvas) >= TONE_CONTRAST, (theme, axis.name(), canvas.name())
