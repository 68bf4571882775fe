"""Text that JSON can carry but UTF-8 cannot: a lone UTF-16 surrogate.

JSON's `\\ud800` escape is valid syntax, and Python's parser turns it into a `str` holding a lone
surrogate, which every later step that encodes the text (the tokenizer, a log line, the store)
refuses with UnicodeEncodeError. So a request is searched once, whole, as it is parsed: every
string, keys included, in every field, known or not, so a field added later is covered too.
"""

from __future__ import annotations

from typing import Any


def unencodable_field(data: Any, where: str = "") -> str | None:
    """The path (`messages[0].content`, `stop[1]`) of the first string in `data` that UTF-8
    cannot encode, "" for the document itself, or None when every string can be encoded."""
    if isinstance(data, str):
        return None if _encodable(data) else where
    if isinstance(data, dict):
        for key, value in data.items():
            path = f"{where}.{key}" if where else str(key)
            if not _encodable(str(key)):
                return where or "(a key)"
            found = unencodable_field(value, path)
            if found is not None:
                return found
    elif isinstance(data, list):
        for i, value in enumerate(data):
            found = unencodable_field(value, f"{where}[{i}]")
            if found is not None:
                return found
    return None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
