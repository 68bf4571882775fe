"""A loop detector for generated text: does a run of words, or a line, keep coming back?

Pure functions (no model), used by the everyday evaluation (tests/engine/everyday.py) to judge
answers by a property that holds on any CPU rather than by another machine's words, and unit
tested in tests/unit/test_loops.py. A small model at greedy settings loops in two ways: a short
phrase over and over ("a lone soul, a lone soul, ...") and one sentence or line repeated to the
token limit. Both put the same run of `n` words in the text `repeats` times or more; the second
also repeats a whole line. Case and punctuation are ignored ("Soul," and "soul" are one word).
"""

from __future__ import annotations

import re
from collections import Counter

_WORD = re.compile(r"[\w']+", re.UNICODE)
# A list item's marker ("7.", "7)", "-", "*"): "6. Frogs", "7. Frogs" repeat one item.
_MARKER = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+")


def words(text: str) -> list[str]:
    """The text's words, lower case, without punctuation."""
    return [w.lower() for w in _WORD.findall(text)]


def repeated_run(ws: list[str], n: int) -> tuple[tuple[str, ...], int]:
    """The run of `n` consecutive words that occurs most often, and how often (overlapping
    occurrences count: a phrase looped k times holds its own runs about k times)."""
    grams = Counter(tuple(ws[i:i + n]) for i in range(len(ws) - n + 1))
    return grams.most_common(1)[0] if grams else ((), 0)


def line_words(text: str) -> list[list[str]]:
    """Each line's words, without a list item's marker (its number or bullet)."""
    return [words(_MARKER.sub("", line)) for line in text.splitlines()]


def repeated_line(text: str) -> tuple[str, int]:
    """The non-empty line (compared as words, list markers left out) that occurs most often."""
    lines = Counter(" ".join(ws) for ws in line_words(text) if ws)
    return lines.most_common(1)[0] if lines else ("", 0)


def loop_found(text: str, n: int = 4, repeats: int = 3) -> str:
    """What loops in `text` ("" when nothing does): a run of `n` words, or a line, that occurs
    `repeats` times or more. List markers do not count as words: "6. Frogs 7. Frogs 8. Frogs"
    is one item over and over."""
    if n < 1 or repeats < 2:
        raise ValueError("a loop is a run of at least one word that comes back at least once")
    gram, count = repeated_run([w for ws in line_words(text) for w in ws], n)
    if count >= repeats:
        return f"{' '.join(gram)!r} × {count}"
    line, count = repeated_line(text)
    if count >= repeats:
        return f"line {line!r} × {count}"
    return ""
