"""Reading a metrics file: ours, or upstream's ``bmoe_metrics`` v1 and v2.

Columns and summary keys are read by name, never by position, so files written by the upstream
engine and by us go through the same parser. A declared column is typed by its kind in
metric_columns.SPECS (an int column reads as int, an empty numeric cell as -1); any other column
is kept, as a number when it parses as one. A file that cannot be read raises MetricsFormatError,
which names the file and the line. docs/telemetry.md is the schema.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from workbench.engine.measured import as_measured
from workbench.engine.metric_columns import KINDS
from workbench.engine.metrics import UNMEASURED
from workbench.engine.metrics_syntax import (
    FORMAT_NAME,
    FORMAT_V2,
    TURN_SETTINGS_KEY,
    parse_pairs,
    unescape_text,
)
from workbench.file_kind import read_bytes


class MetricsFormatError(ValueError):
    """A metrics file that cannot be read; names the file and the 1-based line."""

    def __init__(self, source: str, line: int, message: str) -> None:
        super().__init__(f"{source}, line {line}: {message}")
        self.source = source
        self.line = line
        self.message = message


@dataclass
class MetricsFile:
    format: str  # "bmoe_metrics v1", "bmoe_metrics v2"
    preamble: dict[str, str] = field(default_factory=dict)  # every # key=value; later keys win
    settings: dict[str, object] = field(default_factory=dict)  # from wb_settings (ours only)
    columns: list[str] = field(default_factory=list)
    rows: list[dict[str, float | int | str]] = field(default_factory=list)
    summaries: list[dict[str, str | float]] = field(default_factory=list)
    # One per summary, in order: the settings its turn ran with (the wb_turn_settings line
    # before it); {} where the file has none (an older file, upstream's).
    turn_settings: list[dict[str, object]] = field(default_factory=list)


_INT_RE = re.compile(r"[+-]?\d+\Z")
_FLOAT_RE = re.compile(
    r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|nan|inf|infinity)\Z", re.IGNORECASE
)


def _number(text: str) -> int | float | None:
    """Strict number parse (no underscores or padding, which int()/float() would accept)."""
    if _INT_RE.match(text):
        return int(text)
    if _FLOAT_RE.match(text):
        return float(text)
    return None


def _column_kind(name: str) -> str:
    # A column we do not declare (a newer upstream's, another tool's): a number if it looks
    # like one, else text.
    return KINDS.get(name, "auto")


class _LineFeed:
    """Physical lines with their numbers. csv.reader pulls the continuation lines of a quoted
    multi-line field through __next__, so comment handling happens only at record starts."""

    def __init__(self, text: str) -> None:
        self._lines = io.StringIO(text, newline="")  # splits on \n, \r\n, \r only
        self._peeked: str | None = None
        self.line_no = 0

    def peek(self) -> str | None:
        if self._peeked is None:
            self._peeked = self._lines.readline() or None
        return self._peeked

    def __iter__(self) -> _LineFeed:
        return self

    def __next__(self) -> str:
        line = self.peek()
        if line is None:
            raise StopIteration
        self._peeked = None
        self.line_no += 1
        return line


class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source
        self.format: str | None = None
        self.preamble: dict[str, str] = {}
        self.key_lines: dict[str, int] = {}
        self.columns: list[str] | None = None
        self.kinds: list[str] = []
        self.rows: list[dict[str, float | int | str]] = []
        self.summaries: list[dict[str, str | float]] = []
        self.turn_settings: list[dict[str, object]] = []
        self._next_turn_settings: dict[str, object] = {}  # read, waiting for its summary

    def error(self, line: int, message: str) -> MetricsFormatError:
        return MetricsFormatError(self.source, line, message)

    def comment(self, line_no: int, line: str) -> None:
        body = line[1:].strip()
        word, _, rest = body.partition(" ")
        if word == FORMAT_NAME:
            version = rest.strip()
            if line_no != 1:
                raise self.error(line_no, f"'{FORMAT_NAME}' format line must be the first line")
            if not re.fullmatch(r"v\d+", version):
                raise self.error(line_no, f"unknown format version {version!r}")
            self.format = f"{FORMAT_NAME} {version}"
            return
        if line_no == 1:
            raise self.error(1, f"not a metrics file: expected '# {FORMAT_NAME} v2' or a header")
        if word == "summary":
            summary: dict[str, str | float] = {}
            for key, value in parse_pairs(rest):
                number = _number(value)
                summary[key] = value if number is None else number
            self.summaries.append(summary)
            self.turn_settings.append(self._next_turn_settings)
            self._next_turn_settings = {}
            return
        for key, value in parse_pairs(body):
            if key == TURN_SETTINGS_KEY:
                self._next_turn_settings = self.json_object(line_no, key, value)
                continue
            self.preamble[key] = value
            self.key_lines[key] = line_no

    def header(self, line_no: int, record: list[str]) -> None:
        names = [name.strip() for name in record]
        if not names or any(not name for name in names):
            raise self.error(line_no, "header has an empty column name")
        if len(set(names)) != len(names):
            raise self.error(line_no, "header repeats a column name")
        if all(_number(name) is not None for name in names):
            raise self.error(line_no, "expected the CSV header, found a data row")
        if self.format is None and not {"step", "wall_ms"} <= set(names):
            raise self.error(line_no, "not a metrics file: no format line and no step/wall_ms")
        self.columns = names
        self.kinds = [_column_kind(name) for name in names]

    def row(self, line_no: int, record: list[str]) -> None:
        assert self.columns is not None
        if len(record) != len(self.columns):
            raise self.error(
                line_no, f"row has {len(record)} fields, the header has {len(self.columns)}"
            )
        row: dict[str, float | int | str] = {}
        for name, kind, text in zip(self.columns, self.kinds, record, strict=True):
            if kind == "text":
                row[name] = unescape_text(text)
                continue
            if kind != "auto" and text.strip() == "":
                row[name] = -1 if kind == "int" else UNMEASURED  # empty = unmeasured
                continue
            number = _number(text.strip())
            if number is None:
                if kind != "auto":
                    raise self.error(line_no, f"column {name!r}: {text!r} is not a number")
                row[name] = text
            elif kind == "int" and isinstance(number, float) and number.is_integer():
                row[name] = int(number)
            elif kind == "float":
                row[name] = float(number)
            else:
                row[name] = number
        self.rows.append(row)

    def json_object(self, line: int, key: str, raw: str) -> dict[str, object]:
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise self.error(line, f"{key} is not valid JSON: {exc.msg}") from exc
        if not isinstance(value, dict):
            raise self.error(line, f"{key} is not a JSON object")
        return value

    def settings(self) -> dict[str, object]:
        raw = self.preamble.get("wb_settings")
        if raw is None:
            return {}
        return self.json_object(self.key_lines["wb_settings"], "wb_settings", raw)

    def result(self) -> MetricsFile:
        columns = self.columns or []
        fmt = self.format
        if fmt is None:
            # A header-first file (upstream writes no preamble without run info): the columns
            # tell the version, since v2 added loop_overhead_ms and the speculation columns.
            fmt = FORMAT_V2 if "loop_overhead_ms" in columns else f"{FORMAT_NAME} v1"
        return MetricsFile(
            format=fmt,
            preamble=self.preamble,
            settings=self.settings(),
            columns=list(columns),
            rows=self.rows,
            summaries=self.summaries,
            turn_settings=self.turn_settings,
        )


def parse_metrics(text: str, source: str = "<metrics>") -> MetricsFile:
    """Parse the text of a metrics file (ours, upstream v1 or v2)."""
    if not text.strip():
        raise MetricsFormatError(source, 1, "empty file")
    parser = _Parser(source)
    feed = _LineFeed(text)
    reader = csv.reader(feed, strict=True)
    while (line := feed.peek()) is not None:
        if line.startswith("#"):
            next(feed)
            parser.comment(feed.line_no, line)
            continue
        if not line.strip():
            next(feed)
            continue
        start = feed.line_no + 1
        try:
            record = next(reader)
        except csv.Error as exc:
            raise parser.error(start, f"bad CSV: {exc}") from exc
        if parser.columns is None:
            parser.header(start, record)
        else:
            parser.row(start, record)
    return parser.result()


def read_metrics_csv(path: str | Path) -> MetricsFile:
    """Read a metrics file written by us or by the upstream engine (v1 or v2)."""
    data = read_bytes(path, "a metrics file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise MetricsFormatError(str(path), line, "not UTF-8 text") from exc
    return parse_metrics(text, str(path))


def column(mf: MetricsFile, name: str) -> list[float]:
    """One column as floats for plotting: the -1 sentinel, text and absent values become NaN.

    A column the file does not have gives all NaN (older files lack newer columns).
    """
    return [as_measured(row.get(name)) for row in mf.rows]
