"""The flow layout: one line when there is room, more lines when not, never narrower than its
widest item; a stretch pushes what follows it to the right, on every line."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QPushButton, QWidget

from workbench.ui.qt_flow_layout import QtFlowLayout


def make(qtbot, texts: list[str], stretch_at: int | None = None):
    host = QWidget()
    flow = QtFlowLayout(host)
    buttons = []
    for i, text in enumerate(texts):
        if i == stretch_at:
            flow.add_stretch()
        buttons.append(QPushButton(text))
        flow.addWidget(buttons[-1])
    qtbot.addWidget(host)
    return host, flow, buttons


def place(host: QWidget, flow: QtFlowLayout, width: int) -> None:
    host.resize(width, flow.heightForWidth(width))
    flow.setGeometry(host.rect())


def test_it_wraps_instead_of_widening(qtbot) -> None:
    host, flow, buttons = make(qtbot, ["Tokens", "Copy", "Edit", "Regenerate"])
    widest = max(b.sizeHint().width() for b in buttons)
    assert flow.minimumSize().width() == widest
    assert flow.sizeHint().width() >= sum(b.sizeHint().width() for b in buttons)
    one_line = flow.heightForWidth(flow.sizeHint().width())
    assert flow.heightForWidth(widest) > 2 * one_line  # a line each, or nearly
    place(host, flow, widest)
    for b in buttons:
        assert host.rect().contains(b.geometry()) and b.width() == b.sizeHint().width()
    assert len({b.y() for b in buttons}) == len(buttons)
    place(host, flow, flow.sizeHint().width())
    assert len({b.y() for b in buttons}) == 1


def test_a_stretch_keeps_the_rest_on_the_right(qtbot) -> None:
    host, flow, buttons = make(qtbot, ["Assistant", "Copy", "Regenerate"], stretch_at=1)
    width = buttons[0].sizeHint().width() + buttons[1].sizeHint().width() + 40
    place(host, flow, width)  # "Regenerate" goes to a second line
    first, copy, regenerate = buttons
    assert first.x() == 0 and copy.y() == first.y() and regenerate.y() > first.y()
    assert copy.geometry().right() == host.width() - 1
    assert regenerate.geometry().right() == host.width() - 1


def test_a_word_wrapped_label_takes_one_line_when_it_fits(qtbot) -> None:
    host = QWidget()
    flow = QtFlowLayout(host)
    label = QLabel("the chat template switches thinking on and off")
    label.setWordWrap(True)
    flow.addWidget(label)
    qtbot.addWidget(host)
    wide = label.fontMetrics().horizontalAdvance(label.text()) + 40
    place(host, flow, wide)
    assert label.height() == label.heightForWidth(label.width()) < 2 * label.fontMetrics().height()
    place(host, flow, 120)  # narrow: it wraps, within the width
    assert label.width() <= 120 and label.height() >= 2 * label.fontMetrics().height()
