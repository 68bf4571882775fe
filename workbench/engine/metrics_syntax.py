"""The metrics file's syntax that writer and reader share: the format line, key=value values and
the escaping of token text (docs/telemetry.md, "Value encoding" and "`piece` escaping")."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from urllib.parse import unquote

FORMAT_NAME = "bmoe_metrics"
FORMAT_V2 = "bmoe_metrics v2"
# A turn's settings, on a line of their own before its `# summary` line: one wb_ key holding a
# JSON object (docs/telemetry.md).
TURN_SETTINGS_KEY = "wb_turn_settings"

# --------------------------------------------------------------------------------------------
# key=value values: whitespace-separated pairs, so a value may not contain whitespace. Such
# characters (and '%', controls, line separators, lone surrogates) are percent-encoded as UTF-8
# bytes, e.g. a space becomes %20. Chosen over quoting because upstream readers split on
# whitespace: an encoded value stays one token for them.


def _needs_percent(ch: str) -> bool:
    return ch == "%" or ch.isspace() or unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp")


def _percent(ch: str) -> str:
    try:
        raw = ch.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate that did not come from undecodable bytes
        raw = ch.encode("utf-8", "surrogatepass")
    return "".join(f"%{b:02X}" for b in raw)


def encode_value(text: str) -> str:
    """Make ``text`` safe as the value of a whitespace-separated key=value pair."""
    return "".join(_percent(ch) if _needs_percent(ch) else ch for ch in text)


def decode_value(text: str) -> str:
    return unquote(text, errors="surrogateescape")


def format_pairs(pairs: Iterable[tuple[str, str]]) -> str:
    """Values must already be formatted (and encoded where they are free text)."""
    return " ".join(f"{key}={value}" for key, value in pairs)


def parse_pairs(body: str) -> list[tuple[str, str]]:
    """Split ``k=v k=v`` into decoded pairs.

    A token without '=' continues the previous value after a space: upstream writes the model's
    basename unencoded, so ``model=My Model.gguf arch=x`` must still give the whole name.
    """
    pairs: list[tuple[str, str]] = []
    for token in body.split():
        key, eq, value = token.partition("=")
        if eq and key:
            pairs.append((key, decode_value(value)))
        elif pairs:
            last_key, last_value = pairs[-1]
            pairs[-1] = (last_key, f"{last_value} {decode_value(token)}")
    return pairs


# --------------------------------------------------------------------------------------------
# Token text in the piece column. Backslash escapes keep every row on one physical line (upstream
# and shell tools read these files line by line); the csv module then quotes commas and quotes.

_TEXT_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_TEXT_NEEDS_ESCAPE = re.compile(r"[\\\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_TEXT_ESCAPE_SEQ = re.compile(r"\\(?:([\\nrt])|x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4}))")
_TEXT_UNESCAPES = {"\\": "\\", "n": "\n", "r": "\r", "t": "\t"}


def _escape_char(match: re.Match[str]) -> str:
    ch = match.group()
    simple = _TEXT_ESCAPES.get(ch)
    if simple is not None:
        return simple
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_text(text: str) -> str:
    """Backslash-escape line breaks, controls, backslashes and lone surrogates."""
    # The search is the per-token fast path: almost every piece needs no escaping.
    if _TEXT_NEEDS_ESCAPE.search(text) is None:
        return text
    return _TEXT_NEEDS_ESCAPE.sub(_escape_char, text)


def _unescape_seq(match: re.Match[str]) -> str:
    simple, byte, unit = match.groups()
    if simple is not None:
        return _TEXT_UNESCAPES[simple]
    return chr(int(byte or unit, 16))


def unescape_text(text: str) -> str:
    if "\\" not in text:
        return text
    return _TEXT_ESCAPE_SEQ.sub(_unescape_seq, text)
