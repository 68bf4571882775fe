"""Writing the metrics file: number formats, token rows, the preamble and summary lines.

The columns, their order and formats come from metric_columns.SPECS and the summary keys from
summary_keys.KEYS; this module only turns values into text. `row_fields` runs on the engine
thread once per token, so the table is read once, at import, into a getter and a format tuple.
The file's framing (format line, header, buffering) is CsvMetricsSink's, in sinks.py.
"""

from __future__ import annotations

import json
import math
import operator
import re
from collections.abc import Mapping

from workbench.engine.metric_columns import FILE_SPECS, ColumnsDrift
from workbench.engine.metrics import RunInfo, RunSummary, TokenMetrics
from workbench.engine.metrics_syntax import (
    TURN_SETTINGS_KEY,
    encode_value,
    escape_text,
    format_pairs,
)
from workbench.engine.summary_keys import KEYS

# Numeric columns first, then text: one attrgetter and one zip per row, no per-column dispatch.
_NUMERIC = tuple(c for c in FILE_SPECS if c.kind != "text")
if tuple(c.name for c in FILE_SPECS[len(_NUMERIC):]) != ("piece",):
    raise ColumnsDrift("row_fields writes the numeric columns and then piece: a new text "
                       "column needs a place in row_fields")
_NUMERIC_FORMATS = tuple(c.fmt for c in _NUMERIC)
_get_numeric = operator.attrgetter(*(c.name for c in _NUMERIC))


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


# --------------------------------------------------------------------------------------------
# The preamble: upstream's lines with their keys and defaults, then ours (wb_*).

_MISSING = object()

# Where an upstream preamble key finds its value in RunInfo.settings (first name present wins).
# Names follow upstream's config fields; aliases cover the obvious alternatives.
_SETTING_NAMES: dict[str, tuple[str, ...]] = {
    "threads": ("n_threads", "threads"),
    "moe_stream": ("moe_stream", "stream_experts", "moe_enabled"),
    "io_threads": ("io_threads", "n_io_threads"),
    "prefetch": ("prefetch", "prefetch_layers"),
    "drop_cold_frac": ("drop_cold_frac", "drop_cold_experts"),
    "substitute_lambda": ("expert_substitute",),
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
    ("substitute_lambda", 0.0, False),  # upstream 0.21+ appends it: the substitution margin
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
    mmproj = _setting(settings, "mmproj")
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
                # The image projector's file name ("" without one): image figures need it.
                ("wb_mmproj", encode_value(_basename(str(mmproj))
                                           if mmproj not in (_MISSING, None) else "")),
            ]
        ),
        "# wb_settings=" + encode_value(settings_json),
    ]


# --------------------------------------------------------------------------------------------
# Summary lines


def summary_pairs(s: RunSummary) -> list[tuple[str, str]]:
    """Every key of summary_keys.KEYS, in order, with its value formatted (text encoded)."""
    pairs = []
    for k in KEYS:
        value = getattr(s, k.source)
        pairs.append((k.key, _num(k.fmt, value) if k.fmt else encode_value(value)))
    return pairs


def summary_line(s: RunSummary) -> str:
    return "# summary " + format_pairs(summary_pairs(s))


def turn_settings_line(s: RunSummary) -> str | None:
    """The turn's settings (RunSummary.turn_settings) as the line before its summary: one wb_
    key holding a JSON object, so upstream readers take it as one more preamble key of ours and
    ours pair it with the summary after it. None when the turn's settings are unknown."""
    if not s.turn_settings:
        return None
    text = json.dumps(s.turn_settings, separators=(",", ":"), sort_keys=True,
                      ensure_ascii=False, default=str)
    return f"# {TURN_SETTINGS_KEY}=" + encode_value(text)
