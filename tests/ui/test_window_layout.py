"""The window on ordinary screens: its minimum fits 1280 x 720 with the default docks and
1024 x 700 with them tabbed or closed; at 1280 x 720 no label or button is cut short; at its
minimum every button is on screen (or in a scroll area's reach); loading a model and answering
never resize it, whatever the model's name; a message fits a narrow chat column."""

from __future__ import annotations

import os

import pytest
from PySide6.QtCore import QSize
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractScrollArea,
    QApplication,
    QLabel,
    QScrollArea,
    QWidget,
)

from tests.ui.user_actions import WAIT, send
from workbench.store import MessageStats
from workbench.ui.chat.qt_message_widget import QtMessageWidget
from workbench.ui.chat.shown import ShownMessage

# What a screen of that size leaves a window: a title bar and a panel take some height, the
# window's frame a few pixels each side.
FRAME = QSize(16, 64)


def fits(hint: QSize, screen: QSize) -> bool:
    return hint.width() + FRAME.width() <= screen.width() and \
        hint.height() + FRAME.height() <= screen.height()


def settle() -> None:
    for _ in range(3):
        QApplication.processEvents()


def docks(window) -> list:
    return [window.telemetry_dock, window.expert_dock, window.settings_dock, window.runs_dock]


def on_screen(widget: QWidget) -> bool:
    # A dock behind another tab is still isVisible(); only its visible region is empty.
    return widget.isVisible() and not widget.visibleRegion().isEmpty()


def cut_short(widget: QWidget) -> str:
    """Why the widget's text does not fit it ("" when it does)."""
    if hasattr(widget, "elided"):  # QtElidedLabel: short of room, it shows "…"
        return "elided" if widget.elided else ""
    if isinstance(widget, QLabel):
        if not widget.text():
            return ""
        if widget.wordWrap():
            need = widget.heightForWidth(widget.width())
            return f"needs {need} px high, has {widget.height()}" if need > widget.height() else ""
        need = widget.sizeHint().width()
        return f"needs {need} px, has {widget.width()}" if widget.width() < need else ""
    if isinstance(widget, QAbstractButton) and widget.text():
        need = widget.sizeHint().width()
        return f"needs {need} px, has {widget.width()}" if widget.width() < need else ""
    return ""


def shortened(window) -> list[str]:
    """Every label and button on screen whose text is cut short, with each dock in front."""
    found = []
    for dock in docks(window):
        dock.raise_()
        settle()
        for widget in window.findChildren(QWidget):
            if isinstance(widget, QLabel | QAbstractButton) and on_screen(widget):
                why = cut_short(widget)
                if why:
                    found.append(f"{type(widget).__name__} {widget.text()[:40]!r}: {why}")
    window.telemetry_dock.raise_()
    return sorted(set(found))


def scroll_area_of(widget: QWidget) -> QAbstractScrollArea | None:
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, QScrollArea) and parent.widget() is not None \
                and parent.widget().isAncestorOf(widget):
            return parent
        parent = parent.parentWidget()
    return None


def out_of_reach(window) -> list[str]:
    """Buttons on screen that are cut off: partly hidden by what holds them. In a scroll area
    only the horizontal counts (the chat scrolls up and down, and must not need to sideways)."""
    found = []
    for dock in docks(window):
        dock.raise_()
        settle()
        for button in window.findChildren(QAbstractButton):
            if not on_screen(button):
                continue
            area = scroll_area_of(button)
            if area is not None:
                left = button.mapTo(area.viewport(), button.rect().topLeft()).x()
                inside = left >= 0 and left + button.width() <= area.viewport().width()
            else:
                seen = button.visibleRegion().boundingRect()
                inside = seen.size() == button.size()
            if not inside:
                found.append(f"{type(button).__name__} {button.text()!r} "
                             f"in {dock.windowTitle()!r} front")
    window.telemetry_dock.raise_()
    return sorted(set(found))


def test_the_minimum_fits_small_screens_and_nothing_is_cut_short(qtbot, make_window):
    window = make_window()
    send(qtbot, window, "Name a colour.")
    window.chat_view.messages[-1].tokens_button.click()  # the answer's buttons all shown
    settle()
    hint = window.minimumSizeHint()
    assert fits(hint, QSize(1280, 720)), hint
    assert fits(hint, QSize(1024, 700)), hint  # the default docks are tabbed
    for dock in docks(window):
        dock.close()
    settle()
    assert fits(window.minimumSizeHint(), QSize(1024, 700))
    for dock in docks(window):
        dock.show()
    window.telemetry_dock.raise_()

    window.resize(1280, 720)
    settle()
    assert window.size() == QSize(1280, 720)
    assert shortened(window) == []

    # At its smallest every button can still be reached, the chat's too.
    window.resize(window.minimumSizeHint())
    settle()
    assert out_of_reach(window) == []
    assert shortened(window) == []


def test_loading_and_answering_never_resize_the_window(qtbot, make_window, model_config,
                                                       embedded_model_path, tmp_path):
    # A long file name: the status bar says "loading <name>…" while the model loads.
    model = tmp_path / ("a-model-with-a-long-descriptive-file-name-" * 5 + "q4_k_m.gguf")
    os.symlink(embedded_model_path, model)
    window = make_window(load=False)
    # At its smallest: any widget that asks for more while loading or streaming grows it.
    window.resize(window.minimumSizeHint())
    settle()
    size = window.size()
    seen: list[QSize] = []
    set_loading = window.status.set_loading

    def record(fraction: float | None) -> None:
        set_loading(fraction)
        settle()
        seen.append(window.size())

    window.status.set_loading = record
    config = model_config.replace(model=str(model))
    task = window.tasks.spawn(window.load_model(config))
    qtbot.waitUntil(task.done, timeout=WAIT)
    assert task.result() is not None and len(seen) > 2
    settle()
    send(qtbot, window, "Say hello.")
    settle()
    assert set(seen) == {size} and window.size() == size
    assert window.minimumSizeHint().width() <= size.width()


@pytest.mark.parametrize("role", ["user", "assistant"])
def test_a_message_fits_a_narrow_column(qtbot, role):
    stats = MessageStats(stop_reason="length", n_generated=80, n_prompt=20, n_reused=4,
                         prefill_s=0.03, ttft_s=0.03, tok_s=89.3, prefill_tok_s=660.0)
    # Text without spaces (code, a synthetic model's noise) must wrap too, token view and all.
    noise = "um6aum6BH=$<BH=$<BH=$" * 12
    shown = ShownMessage(id=2, role=role, content=f"An answer: {noise}", status="interrupted",
                         stats=stats, version=2, versions=3, previous_id=1, next_id=3)
    widget = QtMessageWidget(shown)
    widget.set_tokens(0, ["An", " answer", ":", " ", *[noise[i:i + 4] for i in range(0, 252, 4)]])
    widget.tokens_button.setChecked(role == "assistant")
    qtbot.addWidget(widget)
    width = 280  # a chat column beside the docks on a small screen
    assert widget.minimumSizeHint().width() <= width
    widget.resize(width, widget.heightForWidth(width))
    widget.show()
    qtbot.waitExposed(widget)
    settle()
    buttons = [b for b in widget.findChildren(QAbstractButton) if b.isVisible()]
    assert {b.text() for b in buttons} >= {"Copy", "Tokens"}
    for button in buttons:
        geometry = button.geometry()
        assert widget.rect().contains(geometry), button.text()
        assert button.width() >= button.sizeHint().width(), button.text()
    for label in widget.findChildren(QLabel):
        if label.isVisible():
            assert cut_short(label) == "", label.text()


def test_a_long_model_name_is_shortened_in_the_status_bar(qtbot):
    from workbench.ui.qt_status_bar import QtStatusBar

    bar = QtStatusBar()
    qtbot.addWidget(bar)
    before = bar.minimumSizeHint().width()
    name = "x" * 300 + ".gguf"
    bar.set_model(f"loading {name}…")
    bar.set_loading(0.5)
    assert bar.minimumSizeHint().width() <= before + bar.load_bar.maximumWidth() + \
        bar.cancel_button.sizeHint().width() + 20
    bar.resize(600, 30)
    bar.show()
    qtbot.waitExposed(bar)
    assert bar.model_label.elided and bar.model_label.toolTip() == f"loading {name}…"
    bar.set_model("short")
    assert not bar.model_label.elided and bar.model_label.toolTip() == ""


def test_the_initial_size_fits_the_screen(qtbot, make_window):
    window = make_window(load=False)
    screen = window.screen().availableGeometry().size()
    hint = window.minimumSizeHint()
    # Never past the screen, unless the screen is smaller than the window can be.
    assert window.width() <= max(screen.width(), hint.width())
    assert window.height() <= max(screen.height(), hint.height())



def test_at_1024x700_the_chat_keeps_a_readable_width(qtbot, make_window):
    """Issue 39: at 1024x700 the chat column was about 250 px wide beside the telemetry dock.
    The dock in front gives way, then the conversation list (folded if need be); the
    telemetry still shows, and a wide window brings the list back."""
    from workbench.ui.qt_main_window import CHAT_READABLE_WIDTH

    window = make_window(load=False)
    window.resize(1440, 900)
    settle()
    wide_dock = window.telemetry_dock.width()
    window.resize(1024, 700)
    qtbot.waitUntil(lambda: window.chat_column.width() >= CHAT_READABLE_WIDTH, timeout=5_000)
    assert window.size() == QSize(1024, 700)
    assert window.telemetry_dock.isVisible() and 0 < window.telemetry_dock.width() <= wide_dock
    assert out_of_reach(window) == []
    window.resize(1440, 900)
    qtbot.waitUntil(lambda: window.conversation_list.width() >= 150, timeout=5_000)
    assert window.chat_column.width() >= CHAT_READABLE_WIDTH
