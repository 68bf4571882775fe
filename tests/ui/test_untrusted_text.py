"""Chat text is untrusted input: whatever a message or an answer holds is shown as written.

Regression for issue 12, case 1: "What does the <div> tag do in HTML?" showed as "What does
the", because the Markdown view passed raw HTML through to Qt.
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import QUrl
from PySide6.QtGui import QDesktopServices, QImage, QTextDocument
from PySide6.QtWidgets import QTextBrowser

from workbench.ui.chat.qt_markdown_view import QtMarkdownView
from workbench.ui.chat.qt_text_view import QtTextView, image_placeholder, is_safe_link
from workbench.ui.qt_plain_label import plain_label

# (message, fragments that must be visible in the rendered text)
NASTY = [
    ("What does the <div> tag do in HTML?", ["What does the <div> tag do in HTML?"]),
    ("What does the `<div>` tag do?", ["What does the <div> tag do?"]),
    ("before </think> after", ["before </think> after"]),
    ("<think>hidden?</think> shown", ["<think>hidden?</think> shown"]),
    ("x <script>alert(1)</script> y", ["x <script>alert(1)</script> y"]),
    ("<b>unbalanced and <i>nested", ["<b>unbalanced and <i>nested"]),
    ("<!-- a comment --> after", ["<!-- a comment --> after"]),
    ("<div>\nblock html\n</div>\n\nnext", ["<div>", "block html", "</div>", "next"]),
    ("entities &amp; &lt;tag&gt; &#x41;", ["entities & <tag> A"]),
    ("<img src=file:///etc/passwd> seen", ["<img src=file:///etc/passwd> seen"]),
    ("<a href=javascript:alert(1)>click</a>", ["<a href=javascript:alert(1)>click</a>"]),
    ("RTL שלום عربى and back", ["RTL שלום عربى and back"]),
    ("combining e\u0301 and zero\u200bwidth", ["combining e\u0301 and zero\u200bwidth"]),
    ("controls a\x07b\x1bc", ["a", "b", "c"]),
    ("nul a\x00b", ["nul a"]),
    ("x" * 100_000 + " end", ["x" * 1000, " end"]),
]


@pytest.mark.parametrize(("text", "visible"), NASTY, ids=[t[:24] for t, _ in NASTY])
def test_every_character_is_shown_as_written(qtbot, text: str, visible: list[str]) -> None:
    view = QtMarkdownView()
    qtbot.addWidget(view)
    view.set_markdown(text)
    shown = "\n".join(w.toPlainText() for w in view._widgets if isinstance(w, QtTextView))
    for fragment in visible:
        assert fragment in shown


def test_a_megabyte_of_text_is_shown_whole(qtbot) -> None:
    paragraph = "word " * 200
    text = "\n\n".join(f"{i}: {paragraph}" for i in range(1000)) + "\n\nTHE END"
    assert len(text) > 1_000_000
    view = QtMarkdownView()
    qtbot.addWidget(view)
    view.set_markdown(text)
    views = [w for w in view._widgets if isinstance(w, QtTextView)]
    assert len(views) == 1001
    assert views[-1].toPlainText() == "THE END"


def _local_image(tmp_path) -> QUrl:
    path = tmp_path / "secret.png"
    image = QImage(8, 8, QImage.Format.Format_RGB32)
    image.fill(0xFF0000)
    assert image.save(str(path))
    return QUrl.fromLocalFile(str(path))


def test_an_image_in_a_message_is_never_loaded(qtbot, tmp_path) -> None:
    url = _local_image(tmp_path)
    markdown = f"look: ![secret]({url.toString()})"
    view = QtTextView()
    qtbot.addWidget(view)
    view.set_text(markdown)
    view.show()
    qtbot.waitExposed(view)
    view.document().documentLayout().documentSize()
    shown = view.document().resource(QTextDocument.ResourceType.ImageResource, url)
    assert shown == image_placeholder() and shown.size().width() == 16
    # Control: a stock QTextBrowser given the same Markdown does read the file.
    stock = QTextBrowser()
    qtbot.addWidget(stock)
    stock.setMarkdown(markdown)
    stock.show()
    qtbot.waitExposed(stock)
    stock.document().documentLayout().documentSize()
    secret = stock.document().resource(QTextDocument.ResourceType.ImageResource, url)
    assert secret is not None and secret.size().width() == 8


@pytest.mark.parametrize(("url", "safe"), [
    ("https://example.com/a?b=c", True),
    ("http://example.com", True),
    ("mailto:someone@example.com", True),
    ("javascript:alert(1)", False),
    ("file:///etc/passwd", False),
    ("data:text/html,<b>x</b>", False),
    ("ftp://example.com", False),
    ("", False),
])
def test_only_web_and_mail_links_are_opened(url: str, safe: bool) -> None:
    assert is_safe_link(QUrl(url)) is safe


def test_clicking_a_javascript_link_opens_nothing(qtbot, monkeypatch) -> None:
    opened: list[str] = []
    monkeypatch.setattr(QDesktopServices, "openUrl", lambda u: opened.append(u.toString()))
    view = QtTextView()
    qtbot.addWidget(view)
    view.set_text("[bad](javascript:alert(1)) and [good](https://example.com)")
    view.anchorClicked.emit(QUrl("javascript:alert(1)"))
    view.anchorClicked.emit(QUrl("https://example.com"))
    assert opened == ["https://example.com"]


def test_a_plain_label_shows_markup_as_text(qtbot) -> None:
    label = plain_label("<b>model</b> <img src=x>")
    qtbot.addWidget(label)
    assert label.text() == "<b>model</b> <img src=x>"
    assert label.textFormat().name == "PlainText"
