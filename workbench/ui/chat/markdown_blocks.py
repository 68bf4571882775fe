"""Split Markdown into prose paragraphs and fenced code blocks (Qt-free).

Qt renders prose Markdown itself; code blocks are cut out first so that each gets its own widget
with syntax colouring and a copy button. During streaming the last fence may still be open: that
block is code too (marked `closed=False`), so code never flashes as prose while it arrives.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A fence: up to three spaces, then ``` or ~~~ (three or more), then an optional info string.
_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})[ \t]*([^`\n]*)$")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n(?=\S)")


@dataclass(frozen=True, slots=True)
class Block:
    kind: str  # "prose" or "code"
    text: str
    language: str = ""  # code only: the first word of the info string
    closed: bool = True  # code only: False while the closing fence has not arrived


def split_blocks(markdown: str) -> list[Block]:
    blocks: list[Block] = []
    prose: list[str] = []
    code: list[str] = []
    fence = ""  # the opening fence while inside code
    indent = 0
    language = ""
    for line in markdown.split("\n"):
        if not fence:
            m = _FENCE.match(line)
            if m:
                if prose:
                    _add_prose(blocks, prose)
                    prose = []
                indent, fence = len(m.group(1)), m.group(2)
                language = m.group(3).strip().split(" ")[0] if m.group(3).strip() else ""
                continue
            prose.append(line)
            continue
        stripped = line.strip()
        if stripped.startswith(fence[0] * len(fence)) and set(stripped) == {fence[0]}:
            blocks.append(Block("code", "\n".join(code), language, closed=True))
            code, fence = [], ""
            continue
        # CommonMark removes up to the fence's own indentation from each code line.
        code.append(line[min(indent, len(line) - len(line.lstrip(" "))):])
    if fence:
        blocks.append(Block("code", "\n".join(code), language, closed=False))
    elif prose:
        _add_prose(blocks, prose)
    return blocks


def _add_prose(blocks: list[Block], lines: list[str]) -> None:
    """Prose as one block per paragraph, so a streaming answer re-lays out only its last
    paragraph. A blank line followed by indented text (a list item's second paragraph) does
    not split: alone, that text would read as an indented code block."""
    text = "\n".join(lines).strip("\n")
    for paragraph in _PARAGRAPH_BREAK.split(text):
        if paragraph.strip():
            blocks.append(Block("prose", paragraph.strip("\n")))
