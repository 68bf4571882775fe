"""Where per-token telemetry goes: a metrics CSV file, memory, or several of them at once.

The engine thread calls a sink once per generated token, so every sink here is cheap per call;
the CSV sink buffers and flushes only at the end of a turn and on close. The file format itself
is metrics_writer.py (rows, preamble, summary lines, from the tables in metric_columns.py and
summary_keys.py); its reader is metrics_reader.py.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Protocol, runtime_checkable

from workbench.engine.metric_columns import COLUMNS
from workbench.engine.metrics import RunInfo, RunSummary, TokenMetrics
from workbench.engine.metrics_syntax import FORMAT_V2
from workbench.engine.metrics_writer import preamble_lines, row_fields, summary_line


@runtime_checkable
class Sink(Protocol):
    def on_run_info(self, info: RunInfo) -> None: ...

    def on_token(self, m: TokenMetrics) -> None: ...

    def on_summary(self, s: RunSummary) -> None: ...

    def close(self) -> None: ...


class CsvMetricsSink:
    """Writes one session to a ``bmoe_metrics v2`` file (truncating it, as upstream does).

    Call order: on_run_info once (optional, but before any token), then tokens and one summary
    per turn, then close. Rows stay in a large buffer until the turn's summary or close, so a
    token costs a format and a memcpy, not a system call.
    """

    def __init__(self, path: str | os.PathLike[str], buffer_bytes: int = 1 << 20) -> None:
        self.path = Path(path)
        # errors="backslashreplace": text that cannot be UTF-8 (lone surrogates outside the
        # piece column, which escapes its own) must not raise on the engine thread.
        self._file = open(  # noqa: SIM115 - the sink owns the file until close()
            self.path,
            "w",
            encoding="utf-8",
            errors="backslashreplace",
            newline="",
            buffering=buffer_bytes,
        )
        self._csv = csv.writer(self._file, lineterminator="\n")
        self._file.write(f"# {FORMAT_V2}\n")
        self._header_written = False
        self._has_run_info = False

    def on_run_info(self, info: RunInfo) -> None:
        if self._has_run_info:
            raise ValueError("a metrics file holds one session: open a new sink for new run info")
        if self._header_written:
            raise ValueError("run info must come before the first token or summary")
        self._has_run_info = True
        self._file.write("".join(line + "\n" for line in preamble_lines(info)))
        self._write_header()
        # Flushed at once: a session that dies during its first turn still says what it was.
        self._file.flush()

    def on_token(self, m: TokenMetrics) -> None:
        if not self._header_written:
            self._write_header()
        self._csv.writerow(row_fields(m))

    def on_summary(self, s: RunSummary) -> None:
        if not self._header_written:
            self._write_header()
        self._file.write(summary_line(s) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file.closed:
            return
        try:
            if not self._header_written:
                self._write_header()  # even an empty session is a readable file
        finally:
            self._file.close()

    def _write_header(self) -> None:
        self._csv.writerow(COLUMNS)
        self._header_written = True

    def __enter__(self) -> CsvMetricsSink:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class FanoutSink:
    """Forwards every call to several sinks, in order.

    Every sink gets the call even if an earlier one raised (a full disk must not starve the UI's
    sink); the first error is re-raised afterwards.
    """

    def __init__(self, *sinks: Sink) -> None:
        self.sinks: tuple[Sink, ...] = sinks

    def on_run_info(self, info: RunInfo) -> None:
        self._each(lambda sink: sink.on_run_info(info))

    def on_token(self, m: TokenMetrics) -> None:
        self._each(lambda sink: sink.on_token(m))

    def on_summary(self, s: RunSummary) -> None:
        self._each(lambda sink: sink.on_summary(s))

    def close(self) -> None:
        self._each(lambda sink: sink.close())

    def _each(self, call: Callable[[Sink], None]) -> None:
        first: BaseException | None = None
        for sink in self.sinks:
            try:
                call(sink)
            except Exception as exc:
                if first is None:
                    first = exc
        if first is not None:
            raise first


@dataclass
class MemorySink:
    """Keeps everything it is given, as is (tests, and the UI's view of the current run)."""

    run_info: RunInfo | None = None
    tokens: list[TokenMetrics] = field(default_factory=list)
    summaries: list[RunSummary] = field(default_factory=list)
    closed: bool = False

    def on_run_info(self, info: RunInfo) -> None:
        self.run_info = info

    def on_token(self, m: TokenMetrics) -> None:
        self.tokens.append(m)

    def on_summary(self, s: RunSummary) -> None:
        self.summaries.append(s)

    def close(self) -> None:
        self.closed = True
