"""A stored run as a metrics file: written by the engine's own CsvMetricsSink, so an export is
byte-for-byte what a headless run with --metrics would have written, and reads back through
read_metrics_csv like any other (Qt-free).
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from workbench.engine.metrics import ModelIdentity, RunInfo, TokenMetrics
from workbench.engine.metrics_reader import MetricsFile, read_metrics_csv
from workbench.engine.sinks import CsvMetricsSink
from workbench.store import Run

_TOKEN_FIELDS = {f.name for f in dataclasses.fields(TokenMetrics)}


def _pick(d: Mapping[str, Any], key: str, default: Any) -> Any:
    value = d.get(key, default)
    return default if value is None else value


def run_info_from(run: Run) -> RunInfo:
    """The RunInfo the run was recorded with; fields a record lacks are unmeasured (-1, "")."""
    info, model = run.info, run.model or dict(run.info.get("model") or {})
    return RunInfo(
        engine_version=str(_pick(info, "engine_version", run.engine_version)),
        llama_cpp_python_version=str(_pick(info, "llama_cpp_python_version", "")),
        model=ModelIdentity(path=str(_pick(model, "path", "")), name=str(_pick(model, "name", "")),
                            size_bytes=int(_pick(model, "size_bytes", -1)),
                            fast_hash=str(_pick(model, "fast_hash", ""))),
        arch=str(_pick(info, "arch", "")),
        n_layer=int(_pick(info, "n_layer", -1)),
        n_expert=int(_pick(info, "n_expert", -1)),
        n_expert_used=int(_pick(info, "n_expert_used", -1)),
        n_vocab=int(_pick(info, "n_vocab", -1)),
        n_ctx_train=int(_pick(info, "n_ctx_train", -1)),
        chat_template=bool(_pick(info, "chat_template", run.settings.get("chat_template", True))),
        settings=dict(run.settings),
    )


def token_metrics(rows: Iterable[Mapping[str, Any]]) -> list[TokenMetrics]:
    """Store rows back into TokenMetrics (columns a newer schema added are left out)."""
    return [TokenMetrics(**{k: v for k, v in row.items() if k in _TOKEN_FIELDS}) for row in rows]


def write_run_csv(path: str | Path, run: Run, rows: Iterable[Mapping[str, Any]]) -> Path:
    """Write the run (run info, its token rows, its summary when finished) as a metrics CSV."""
    out = Path(path)
    summary = run.run_summary()
    with CsvMetricsSink(out) as sink:
        sink.on_run_info(run_info_from(run))
        for m in token_metrics(rows):
            sink.on_token(m)
        if summary is not None:
            sink.on_summary(summary)
    return out


def run_metrics(run: Run, rows: Iterable[Mapping[str, Any]]) -> MetricsFile:
    """The run as the reader sees its exported file (one format path for stored and imported
    runs, so the compare view cannot treat them differently)."""
    with tempfile.TemporaryDirectory(prefix="workbench-run-") as tmp:
        return read_metrics_csv(write_run_csv(Path(tmp) / f"run-{run.id}.csv", run, rows))
