"""Where per-token telemetry goes: a metrics CSV file, memory, or several of them at once.

The engine thread calls a sink once per generated token, so every sink here is cheap per call;
the CSV sink buffers and flushes only at the end of a turn and on close. The file format itself
is metrics_writer.py (rows, preamble, summary lines, from the tables in metric_columns.py and
summary_keys.py); its reader is metrics_reader.py.
"""

from __future__ import annotations

import contextlib
import csv
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Protocol, runtime_checkable

from workbench.atomic_write import AtomicFile, OutputFileError, explain
from workbench.engine.metric_columns import COLUMNS
from workbench.engine.metrics import RunInfo, RunSummary, TokenMetrics
from workbench.engine.metrics_syntax import FORMAT_V2
from workbench.engine.metrics_writer import (
    preamble_lines,
    row_fields,
    summary_line,
    turn_settings_line,
)

ROW_BATCH = 4096  # rows a CSV sink keeps before it formats them (bounds what it holds)


@runtime_checkable
class Sink(Protocol):
    def on_run_info(self, info: RunInfo) -> None: ...

    def on_token(self, m: TokenMetrics) -> None: ...

    def on_summary(self, s: RunSummary) -> None: ...

    def close(self) -> None: ...


class CsvMetricsSink:
    """Writes one session to a ``bmoe_metrics v2`` file, which appears whole when it is closed.

    Call order: on_run_info once (optional, but before any token), then tokens and one summary
    per turn, then close. A token costs a list append: rows are formatted in batches (at the
    turn's summary, at close, every ROW_BATCH rows) into a large buffer flushed at the summary
    or close, so the decode loop pays neither the formatting nor a system call.

    The file is written under a temporary name beside `path` (`partial_path`, readable while the
    session runs) and renamed over `path` by close(), so an earlier file of that name is replaced
    only by a complete one (atomic_write.AtomicFile). A bad `path` (missing directory, a
    directory) raises OutputFileError at once. A write that fails later (a full disk) never
    raises on the engine thread, which would end the answer: the temporary is removed, `error`
    says what happened, later calls are ignored, and close() raises the error. `discard()` drops
    the session (a model that failed to load) and leaves any earlier file as it was.
    """

    def __init__(self, path: str | os.PathLike[str], buffer_bytes: int = 1 << 20) -> None:
        # errors="backslashreplace": text that cannot be UTF-8 (lone surrogates outside the
        # piece column, which escapes its own) must not raise on the engine thread.
        self._out = AtomicFile(path, "w", encoding="utf-8", errors="backslashreplace",
                               newline="", buffering=buffer_bytes)
        self.path = self._out.path
        self.partial_path = self._out.partial_path
        self.error: OutputFileError | None = None
        self._file = self._out.file
        self._csv = csv.writer(self._file, lineterminator="\n")
        self._header_written = False
        self._has_run_info = False
        self._raised = False
        self._pending: list[TokenMetrics] = []  # rows not yet formatted (on_token)
        self._guarded(lambda: self._file.write(f"# {FORMAT_V2}\n"))

    def on_run_info(self, info: RunInfo) -> None:
        if self._has_run_info:
            raise ValueError("a metrics file holds one session: open a new sink for new run info")
        if self._header_written or self._pending:
            raise ValueError("run info must come before the first token or summary")
        self._has_run_info = True

        def write() -> None:
            self._file.write("".join(line + "\n" for line in preamble_lines(info)))
            self._write_header()
            # Flushed at once: a session that dies during its first turn still says what it was.
            self._file.flush()

        self._guarded(write)

    def on_token(self, m: TokenMetrics) -> None:
        # Kept as is and formatted in batches, off the decode loop (issue 38): at a turn's
        # summary, at close, or every ROW_BATCH rows. The file's bytes are the same.
        if self.error is not None:
            return
        if self._out.closed:
            raise ValueError("a token after the metrics file was closed")
        self._pending.append(m)
        if len(self._pending) >= ROW_BATCH:
            self._guarded(self._write_rows)

    def _write_rows(self) -> None:
        if not self._header_written:
            self._write_header()
        pending, self._pending = self._pending, []
        self._csv.writerows(row_fields(m) for m in pending)

    def on_summary(self, s: RunSummary) -> None:
        def write() -> None:
            self._write_rows()
            if (settings := turn_settings_line(s)) is not None:
                self._file.write(settings + "\n")
            self._file.write(summary_line(s) + "\n")
            self._file.flush()

        self._guarded(write)

    def close(self) -> None:
        """Put the file in place; raises OutputFileError (once) if it could not be written."""
        if self.error is None and not self._out.closed:
            self._guarded(self._write_rows)  # even an empty session is a readable file
            if self.error is None:
                try:
                    self._out.commit()
                except OutputFileError as exc:
                    self.error = exc
        if self.error is not None and not self._raised:
            self._raised = True
            raise self.error

    def discard(self) -> None:
        """Write nothing: the temporary goes, an earlier file at `path` stays as it was."""
        self._out.discard()

    def _guarded(self, write: Callable[[], None]) -> None:
        if self.error is not None:
            return
        try:
            write()
        except OSError as exc:
            self._fail(exc)

    def _fail(self, exc: OSError) -> None:
        self._out.discard()
        base = explain(exc, self.path)
        self.error = OutputFileError(f"metrics file: {base} The chat goes on, unrecorded.",
                                     base.errno)

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
        if exc is None:
            self.close()
            return
        # What was written is kept, as it always was. The body's exception is the one to see: a
        # failure to write the file too must not replace it.
        with contextlib.suppress(OutputFileError):
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
