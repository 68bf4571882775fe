"""The chat's text views: Markdown that sizes itself, streaming text that is appended, and a
wheel over an answer that is left to the page."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QFont, QWheelEvent
from PySide6.QtWidgets import QApplication, QTextBrowser

from workbench.ui.chat.qt_code_block import QtCodeBlock
from workbench.ui.chat.qt_text_view import QtTextView


def test_markdown_is_rendered_and_the_source_kept(qtbot) -> None:
    view = QtTextView()
    qtbot.addWidget(view)
    view.set_text("Some **bold** words and a [link](https://example.com).")
    assert view.text() == "Some **bold** words and a [link](https://example.com)."
    assert view.toPlainText() == "Some bold words and a link."
    bold = view.document().find("bold")
    assert bold.charFormat().fontWeight() == QFont.Weight.Bold
    assert view.document().find("link").charFormat().anchorHref() == "https://example.com"


def test_the_view_is_exactly_as_tall_as_its_text(qtbot) -> None:
    view = QtTextView()
    qtbot.addWidget(view)
    view.resize(300, 10)
    view.show()
    qtbot.waitExposed(view)
    view.set_text("one line")
    one = view.height()
    view.set_text("a longer answer " * 40)
    assert view.height() > 3 * one
    assert view.height() == round(view.document().size().height() + 0.4999)
    tall = view.height()
    view.resize(600, tall)  # wider: the same text needs fewer lines
    qtbot.waitUntil(lambda: view.height() < tall)


def test_plain_text_that_grows_is_appended_and_matches_a_fresh_view(qtbot) -> None:
    streamed, fresh = QtTextView(rich=False), QtTextView(rich=False)
    qtbot.addWidget(streamed)
    qtbot.addWidget(fresh)
    changes: list[tuple[int, int, int]] = []
    streamed.document().contentsChange.connect(lambda *change: changes.append(change))
    text = ""
    for piece in ["The user", " wants a sum.", "\n\nFirst ", "**add**", " the numbers."]:
        grown_from = len(text)
        text += piece
        changes.clear()
        streamed.set_text(text)
        if grown_from:  # only the new piece went in: nothing removed, nothing before it
            assert changes == [(grown_from, 0, len(piece))]
    fresh.set_text(text)
    assert streamed.toPlainText() == fresh.toPlainText() == text  # Markdown stays literal
    assert streamed.height() == fresh.height()
    streamed.set_text("Something else entirely")  # not a continuation: replaced
    assert streamed.toPlainText() == "Something else entirely"


def test_streaming_code_is_appended_and_matches_a_fresh_block(qtbot) -> None:
    streamed, fresh = QtCodeBlock("python"), QtCodeBlock("python")
    qtbot.addWidget(streamed)
    qtbot.addWidget(fresh)
    code = "def square(x):\n    return x * x\n\nprint([square(n) for n in range(5)])"
    heights = []
    for end in range(8, len(code) + 1, 8):
        streamed.set_code(code[:end])
        heights.append(streamed.editor.height())
    streamed.set_code(code)
    fresh.set_code(code)
    assert streamed.code() == fresh.code() == code
    assert streamed.editor.height() == fresh.editor.height() > heights[0]
    streamed.set_code("x = 1")
    assert streamed.code() == "x = 1"


def test_the_wheel_over_an_answer_is_left_to_the_page(qtbot) -> None:
    """An answer never scrolls itself, so it must not take the wheel: Qt hands an ignored
    wheel event on to the chat's scroll area. (A synthesized event does not propagate, so the
    test checks that the view leaves it unaccepted; a text box taller than its window, the
    control, does take it.)"""
    answer, control = QtTextView(), QTextBrowser()
    for widget in (answer, control):
        qtbot.addWidget(widget)
        widget.resize(300, 60)
        widget.show()
        qtbot.waitExposed(widget)
        widget.setPlainText("words that wrap over several lines " * 20)
    answer.set_text("words that wrap over several lines " * 20)
    assert answer.height() > 60 and control.verticalScrollBar().maximum() > 0
    for widget, taken in ((answer, False), (control, True)):
        target = widget.viewport()
        centre = QPointF(target.rect().center())
        wheel = QWheelEvent(centre, QPointF(target.mapToGlobal(centre.toPoint())), QPoint(0, 0),
                            QPoint(0, -120), Qt.MouseButton.NoButton,
                            Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False)
        QApplication.sendEvent(target, wheel)
        assert wheel.isAccepted() is taken
