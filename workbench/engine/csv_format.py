"""The metrics file format: upstream ``bmoe_metrics v2`` plus our own columns and keys.

One file holds one session: a preamble of ``# key=value`` lines (what produced the run), one CSV
header, one row per generated token, and one ``# summary key=value ...`` line per turn. Columns
and summary keys are read by name, so files written by the upstream engine (v1 and v2) and by us
go through the same reader. docs/telemetry.md is the schema; this module is its only code.
"""

from __future__ import annotations

import csv
import io
import json
import math
import operator
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

from workbench.engine.metrics import UNMEASURED, RunInfo, RunSummary, TokenMetrics

FORMAT_NAME = "bmoe_metrics"
FORMAT_V2 = "bmoe_metrics v2"

# Upstream number formats, per column kind.
_INT = "%d"
_MS = "%.3f"
_MEM = "%.1f"

# The 29 upstream columns in upstream order (upstream-engine.md 3.7), with their formats. Every
# name is also the TokenMetrics attribute that feeds it.
_UPSTREAM_SPEC: tuple[tuple[str, str], ...] = (
    ("step", _INT),
    ("steps", _INT),
    ("wall_ms", _MS),
    ("io_ms", _MS),
    ("compute_ms", _MS),
    ("read_bytes", _INT),
    ("cache_hit_pct", "%.2f"),
    ("stall_ms", _MS),
    ("mgmt_ms", _MS),
    ("majflt", _INT),
    ("cpu_ms", _MS),
    ("dense_resident_frac", "%.3f"),
    ("turn", _INT),
    ("majflt_mib", "%.2f"),
    ("cache_budget_mib", _MEM),
    ("rss_mib", _MEM),
    ("rss_anon_mib", _MEM),
    ("rss_file_mib", _MEM),
    ("swap_mib", _MEM),
    ("mem_available_mib", _MEM),
    ("mem_free_mib", _MEM),
    ("swap_free_mib", _MEM),
    ("loop_overhead_ms", _MS),
    ("mtp_batch", _INT),
    ("mtp_draft_ms", _MS),
    ("drain_ms", _MS),
    ("adopt_ms", _MS),
    ("ra_issue_ms", _MS),
    ("ra_wd_ms", _MS),
)
UPSTREAM_COLUMNS: tuple[str, ...] = tuple(name for name, _ in _UPSTREAM_SPEC)
# Ours, appended after the upstream ones so that positional upstream readers keep working.
EXTRA_COLUMNS: tuple[str, ...] = ("token_id", "piece")
COLUMNS: tuple[str, ...] = UPSTREAM_COLUMNS + EXTRA_COLUMNS

_NUMERIC_SPEC = (*_UPSTREAM_SPEC, ("token_id", _INT))
_NUMERIC_FORMATS = tuple(fmt for _, fmt in _NUMERIC_SPEC)
_get_numeric = operator.attrgetter(*(name for name, _ in _NUMERIC_SPEC))

# How the reader types known columns; anything else is parsed as a number when it looks like one.
INT_COLUMNS = frozenset({"step", "steps", "read_bytes", "majflt", "turn", "mtp_batch", "token_id"})
TEXT_COLUMNS = frozenset({"piece"})
FLOAT_COLUMNS = frozenset(UPSTREAM_COLUMNS) - INT_COLUMNS


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


# --------------------------------------------------------------------------------------------
# Writing


def _num(fmt: str, value: float | int | None) -> str:
    """Format a number; anything not finite is unmeasured and written as the -1 sentinel."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        value = -1
    return fmt % value


def row_fields(m: TokenMetrics) -> list[str]:
    """One CSV row (COLUMNS order) for a token. Runs on the engine thread: keep it lean."""
    values = _get_numeric(m)
    fields = [_num(fmt, value) for fmt, value in zip(_NUMERIC_FORMATS, values, strict=True)]
    fields.append(escape_text(m.piece))
    return fields


_MISSING = object()

# Where an upstream preamble key finds its value in RunInfo.settings (first name present wins).
# Names follow upstream's config fields; aliases cover the obvious alternatives.
_SETTING_NAMES: dict[str, tuple[str, ...]] = {
    "threads": ("n_threads", "threads"),
    "moe_stream": ("moe_stream", "stream_experts", "moe_enabled"),
    "io_threads": ("io_threads", "n_io_threads"),
    "prefetch": ("prefetch", "prefetch_layers"),
    "drop_cold_frac": ("drop_cold_frac", "drop_cold_experts"),
    "temp": ("temp", "temperature"),
    "spec_draft_max": ("spec_draft_max", "draft_max"),
}

# Streaming line: (key, upstream default, recorded raw even when streaming is off).
_STREAM_KEYS: tuple[tuple[str, object, bool], ...] = (
    ("moe_stream", 0, False),
    ("cache_mb", 0, False),
    ("cache_auto", 0, True),
    ("cache_floor_mb", 1536, True),
    ("cache_ceil_mb", 0, True),
    ("force_cache", 0, True),
    ("load_all", 0, False),
    ("io_threads", 4, False),
    ("o_direct", 1, False),
    ("overlap", 0, False),
    ("io_two_wave", 0, False),
    ("prefetch", 0, False),
    ("route_ahead", 0, False),
    ("predict_prefetch", 0, False),
    ("predict_log", 0, False),
    ("predict_spec_max", 2, False),
    ("prefetch_sync", 0, False),
    ("dense_weights", "anon", False),
    ("drop_cold_frac", 0.0, False),
    ("drop_renorm", 1, True),
    ("drop_prefill", 0, True),
)

# Sampling line: (key, upstream default). We have no speculative decoding, so spec stays "off".
_SAMPLING_KEYS: tuple[tuple[str, object], ...] = (
    ("temp", 0.0),
    ("top_k", 40),
    ("top_p", 0.95),
    ("seed", 0xFFFFFFFF),
    ("compute_trace_layers", 0),
    ("spec", "off"),
    ("spec_draft_max", 3),
    ("mtp_p_min", 0.0),
    ("ngram_min_match", 3),
)


def _setting(settings: Mapping[str, object], key: str) -> object:
    for name in _SETTING_NAMES.get(key, (key,)):
        if name in settings:
            return settings[name]
    return _MISSING


def _value(value: object) -> str:
    """Format one preamble value the way upstream does (%.4g floats, 0/1 flags)."""
    if value is None or value is _MISSING:
        return "-1"  # not recorded: unmeasured, never 0
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _num("%.4g", value)
    return encode_value(str(value))


def _basename(path: str) -> str:
    # Split on both separators: a file written on Windows may be read anywhere.
    return re.split(r"[\\/]", path)[-1]


def preamble_lines(info: RunInfo) -> list[str]:
    """The ``#`` lines before the header (without the format line), without line endings."""
    settings = info.settings
    streaming = bool(_setting(settings, "moe_stream") not in (_MISSING, None, False, 0, "0"))
    model = _basename(info.model.path) or info.model.name
    model_line = [
        ("model", encode_value(model)),
        ("arch", _value(info.arch)),
        ("n_layer", _value(info.n_layer)),
        ("n_expert", _value(info.n_expert)),
        ("n_expert_used", _value(info.n_expert_used)),
        ("threads", _value(_setting(settings, "threads"))),
        ("n_ctx", _value(_setting(settings, "n_ctx"))),
        ("n_ubatch", _value(_setting(settings, "n_ubatch"))),
        ("chatml", _value(info.chat_template)),
    ]
    stream_line = []
    for key, default, raw in _STREAM_KEYS:
        value = _setting(settings, key)
        if value is _MISSING or value is None:
            value = default
        if not (streaming or raw):
            # Upstream's convention: streaming knobs read 0 when streaming is off. Dense weights
            # are then simply the mmapped model.
            value = "mmap" if key == "dense_weights" else 0
        if key == "moe_stream":
            value = streaming
        stream_line.append((key, _value(value)))
    sampling_line = []
    for key, default in _SAMPLING_KEYS:
        value = _setting(settings, key)
        if value is _MISSING or value is None:
            value = default
        if key == "seed" and isinstance(value, int) and not isinstance(value, bool):
            value &= 0xFFFFFFFF  # upstream prints %u: -1 is LLAMA_DEFAULT_SEED (random)
        sampling_line.append((key, _value(value)))
    version = info.engine_version
    settings_json = json.dumps(
        settings, separators=(",", ":"), sort_keys=True, ensure_ascii=False, default=str
    )
    return [
        f"# engine=workbench-{encode_value(version)}",
        "# " + format_pairs(model_line),
        "# " + format_pairs(stream_line),
        "# " + format_pairs(sampling_line),
        "# "
        + format_pairs(
            [
                ("wb_engine", "workbench"),
                ("wb_version", encode_value(version)),
                ("wb_llama_cpp_python", encode_value(info.llama_cpp_python_version)),
            ]
        ),
        "# "
        + format_pairs(
            [
                ("wb_model_name", encode_value(info.model.name)),
                ("wb_model_size", _value(info.model.size_bytes)),
                ("wb_model_hash", encode_value(info.model.fast_hash)),
                ("wb_n_vocab", _value(info.n_vocab)),
                ("wb_n_ctx_train", _value(info.n_ctx_train)),
            ]
        ),
        "# wb_settings=" + encode_value(settings_json),
    ]


def _per_token_total(per_token: float, n: int) -> float:
    return UNMEASURED if per_token < 0 else per_token * n


def summary_pairs(s: RunSummary) -> list[tuple[str, str]]:
    """Upstream trailer keys that apply to this engine, then ours (docs/telemetry.md)."""
    n = s.n_generated
    return [
        ("tokens", _num(_INT, n)),
        ("s/tok", _num("%.6f", s.s_per_token)),
        ("tok/s", _num("%.3f", s.tokens_per_second)),
        ("read_MiB", _num("%.1f", s.moe_read_mib)),
        ("io_s", _num("%.3f", _per_token_total(s.moe_io_s_per_token, n))),
        ("compute_s/tok", _num("%.6f", s.moe_compute_s_per_token)),
        ("io_s/tok", _num("%.6f", s.moe_io_s_per_token)),
        # %.1f as upstream: its bench script compares the text "-1.0" for "no cache".
        ("cache_hit_pct", _num("%.1f", s.cache_hit_pct)),
        ("n_prompt", _num(_INT, s.n_prompt)),
        ("load_s", _num("%.3f", s.load_seconds)),
        ("prefill_s", _num("%.3f", s.prefill_seconds)),
        ("prefill_tps", _num("%.2f", s.prefill_tokens_per_second)),
        ("stall_s/tok", _num("%.6f", s.moe_stall_s_per_token)),
        ("mgmt_s/tok", _num("%.6f", s.moe_mgmt_s_per_token)),
        ("cache_resident_MiB", _num("%.1f", s.cache_resident_mib)),
        ("cache_budget_MiB", _num("%.1f", s.cache_budget_mib)),
        ("cache_resizes", _num(_INT, s.cache_resizes)),
        ("majflt/tok", _num("%.2f", s.majflt_per_token)),
        ("cpu_s/tok", _num("%.6f", s.cpu_s_per_token)),
        ("token_demand_MiB", _num("%.1f", s.token_demand_mib)),
        ("layer_demand_MiB", _num("%.1f", s.layer_demand_mib)),
        ("experts_routed", _num(_INT, s.experts_routed)),
        ("experts_dropped", _num(_INT, s.experts_dropped)),
        ("loop_overhead_s/tok", _num("%.6f", s.loop_overhead_s_per_token)),
        ("evictions", _num(_INT, s.cache_evictions)),
        ("rereads", _num(_INT, s.cache_rereads)),
        # Ours.
        ("turn", _num(_INT, s.turn)),
        ("n_reused", _num(_INT, s.n_reused)),
        ("n_past", _num(_INT, s.n_past)),
        ("ttft_s", _num("%.3f", s.ttft_seconds)),
        ("gen_s", _num("%.6f", s.gen_seconds)),
        ("stop_reason", encode_value(s.stop_reason)),
    ]


def summary_line(s: RunSummary) -> str:
    return "# summary " + format_pairs(summary_pairs(s))


# --------------------------------------------------------------------------------------------
# Reading


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
    if name in INT_COLUMNS:
        return "int"
    if name in FLOAT_COLUMNS:
        return "float"
    if name in TEXT_COLUMNS:
        return "text"
    return "auto"  # unknown column: a number if it looks like one, else text


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
            return
        for key, value in parse_pairs(body):
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

    def settings(self) -> dict[str, object]:
        raw = self.preamble.get("wb_settings")
        if raw is None:
            return {}
        line = self.key_lines["wb_settings"]
        try:
            settings = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise self.error(line, f"wb_settings is not valid JSON: {exc.msg}") from exc
        if not isinstance(settings, dict):
            raise self.error(line, "wb_settings is not a JSON object")
        return settings

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
    data = Path(path).read_bytes()
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
    out: list[float] = []
    for row in mf.rows:
        value = row.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool) and value != -1:
            out.append(float(value))
        else:
            out.append(math.nan)
    return out
