"""A fenced code block: monospace, coloured by Pygments when it is installed, with a copy button."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontDatabase,
    QGuiApplication,
    QSyntaxHighlighter,
    QTextCharFormat,
)
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from workbench.ui.chat.qt_text_view import set_growing_text
from workbench.ui.qt_plain_label import plain_label

try:  # optional: without Pygments code is shown monochrome
    from pygments.lexers import get_lexer_by_name
    from pygments.token import Token
    from pygments.util import ClassNotFound
except ImportError:  # pragma: no cover - depends on the environment
    get_lexer_by_name = None

_COLOURS = {
    "Keyword": "#8959a8", "Name.Builtin": "#3e999f", "Name.Function": "#4271ae",
    "Name.Class": "#c18401", "String": "#718c00", "Number": "#f5871f", "Comment": "#8e908c",
    "Operator": "#3e999f", "Name.Decorator": "#c18401",
}


class QtPygmentsHighlighter(QSyntaxHighlighter):
    """Colours each line with a Pygments lexer (line by line: good enough for display)."""

    def __init__(self, document, language: str) -> None:
        super().__init__(document)
        self._lexer = None
        if get_lexer_by_name is not None and language:
            try:
                self._lexer = get_lexer_by_name(language)
            except ClassNotFound:
                self._lexer = None
        self._formats: dict[object, QTextCharFormat] = {}

    def _format(self, token) -> QTextCharFormat | None:
        if token in self._formats:
            return self._formats[token]
        fmt = None
        t = token
        while t is not Token and t is not None:
            colour = _COLOURS.get(".".join(t[:]))
            if colour:
                fmt = QTextCharFormat()
                fmt.setForeground(QColor(colour))
                break
            t = t.parent
        self._formats[token] = fmt
        return fmt

    def highlightBlock(self, text: str) -> None:
        if self._lexer is None:
            return
        pos = 0
        for token, value in self._lexer.get_tokens(text):
            fmt = self._format(token)
            if fmt is not None:
                self.setFormat(pos, len(value), fmt)
            pos += len(value)


class QtCodeBlock(QFrame):
    def __init__(self, language: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("codeBlock")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.language = language
        header = QHBoxLayout()
        header.setContentsMargins(6, 2, 2, 2)
        self._lang_label = plain_label(language or "code")
        self._lang_label.setStyleSheet("color: #777; font-size: 11px;")
        self.copy_button = QPushButton("Copy")
        self.copy_button.setFlat(True)
        self.copy_button.setToolTip("Copy this code block")
        self.copy_button.clicked.connect(self.copy)
        header.addWidget(self._lang_label)
        header.addStretch(1)
        header.addWidget(self.copy_button)
        self.editor = QPlainTextEdit()
        self.editor.setReadOnly(True)
        self.editor.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        font.setStyleHint(QFont.StyleHint.Monospace)
        self.editor.setFont(font)
        self.editor.setFrameShape(QFrame.Shape.NoFrame)
        self.editor.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.editor.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self._highlighter = QtPygmentsHighlighter(self.editor.document(), language)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addLayout(header)
        layout.addWidget(self.editor)

    def set_code(self, code: str) -> None:
        old = self.editor.toPlainText()
        if code == old:
            return
        set_growing_text(self.editor, old, code)  # streaming code is appended
        lines = max(1, code.count("\n") + 1)
        metrics = self.editor.fontMetrics()
        scrollbar = self.editor.horizontalScrollBar().sizeHint().height()
        self.editor.setFixedHeight(lines * metrics.lineSpacing() + 12 + scrollbar)

    def code(self) -> str:
        return self.editor.toPlainText()

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.code())
        self.copy_button.setText("Copied")
