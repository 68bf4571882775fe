"""`bench ui`: does the window cost the model speed, and does the UI stay responsive?

Two figures, from interleaved runs of the same prompt and settings (greedy, so the same
tokens every time):
- tok/s with the window live (chat streaming, plots repainting) vs headless: the window's own
  session generating on its engine thread with no listener while the window idles, as
  generated tokens over engine time (decode wall + loop overhead, from the engine's own
  timestamps); target ratio >= 0.97. Beside it each arm's decode and loop time per token, which
  says where a loss is: in the decodes (the UI thread took a core from the engine's team) or in
  the loop;
- event-loop lag while an answer streams into the window: a probe coroutine asks for a 5 ms
  sleep and records how late it wakes (worst and p99; targets 50 and 20 ms). The probe runs in
  runs of its own, so its wake-ups are not billed to the tok/s comparison.
Beside them, the UI thread's own CPU time over the window's answers (from send to done, so it
includes the message's set-up before the prefill and its final render after the last token, which
compete with no decode), as a share of one core: where a tok/s loss would come from, and steadier
from run to run than the ratio.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from workbench.bench.stats import paired_ratio_ci
from workbench.config import Config
from workbench.engine.metrics import RunSummary
from workbench.engine.requests import GenerateRequest
from workbench.engine.summary_labels import RATE
from workbench.ui.qt_main_window import QtMainWindow
from workbench.ui.ui_pacer import LIVE_FRAME_MAX_S

PROMPT = "Tell a short story about a lighthouse keeper and a storm."
PROBE_S = 0.005
SETTLE_S = 0.3
LAG_P99_MS, LAG_MAX_MS, RATIO_MIN = 20.0, 50.0, 0.97
REFRESH_MAX_S = LIVE_FRAME_MAX_S  # the live plots' refresh interval while answering: 5 Hz


def refresh_intervals(frames: list[float], start: float, end: float) -> list[float]:
    """Seconds between the live plots' frames drawn from `start` to `end` (an answer), the
    wait from the answer's start to its first frame included."""
    inside = [t for t in frames if start <= t <= end]
    return [b - a for a, b in zip([start, *inside], inside, strict=False)]


def rate(summary: RunSummary | None) -> float:
    """Tokens per second of engine time, loop overhead included (stricter than decode alone)."""
    if summary is None or summary.n_generated == 0:
        return -1.0
    seconds = summary.gen_seconds + summary.loop_overhead_s_per_token * summary.n_generated
    return summary.n_generated / seconds


async def probe_lag(stop: asyncio.Event, lags: list[float]) -> None:
    while not stop.is_set():
        t0 = time.perf_counter()
        await asyncio.sleep(PROBE_S)
        lags.append(max(0.0, time.perf_counter() - t0 - PROBE_S) * 1e3)


@dataclass(slots=True)
class UiCpu:
    """The UI thread's CPU time and the wall time of the window's answers, summed."""

    cpu_s: float = 0.0
    wall_s: float = 0.0

    @property
    def share(self) -> float:
        """Of one core; -1 before any answer was measured."""
        return self.cpu_s / self.wall_s if self.wall_s > 0 else -1.0


def decode_ms(summary: RunSummary | None) -> float:
    """Milliseconds inside llama_decode per token (-1 unmeasured): where the window's cost
    shows when the UI thread takes a core from the engine's team."""
    if summary is None or summary.n_generated == 0:
        return -1.0
    return 1e3 * summary.gen_seconds / summary.n_generated


async def ui_run(window: QtMainWindow, lags: list[float] | None = None,
                 refresh: list[float] | None = None, ui_cpu: UiCpu | None = None
                 ) -> RunSummary | None:
    """One answer in a new conversation; with `lags`, the lag probe runs meanwhile; with
    `refresh`, the intervals between the live plots' frames meanwhile are added to it; with
    `ui_cpu`, this (the UI) thread's CPU time while answering."""
    await window.conversations.open(None)
    # Let the new conversation's clean-up (old messages deleted, plots cleared and repainted)
    # finish first: the lag measured is that of sending and generating.
    await asyncio.sleep(SETTLE_S)
    stop = asyncio.Event()
    probe = None
    if lags is not None:
        probe = asyncio.get_running_loop().create_task(probe_lag(stop, lags))
    started, cpu_started = time.perf_counter(), time.thread_time()
    try:
        await window.chat.send(PROMPT)
    finally:
        stop.set()
        if probe is not None:
            await probe
    if ui_cpu is not None:
        ui_cpu.cpu_s += time.thread_time() - cpu_started
        ui_cpu.wall_s += time.perf_counter() - started
    if refresh is not None:
        refresh += refresh_intervals(list(window.telemetry.frame_times), started,
                                     time.perf_counter())
    result = window.chat.last_result
    return result.summary if result else None


def headless_run(session, n_predict: int) -> RunSummary | None:
    return session.generate(GenerateRequest(text=PROMPT, n_predict=n_predict)).summary


def bench_script(config: Config, repeats: int, say: Callable[[str], None]):
    async def script(window: QtMainWindow) -> int:
        if window.chat.model is None:
            say("error: the model did not load; see the window's message")
            return 1
        cfg = window.chat.model.config

        async def headless() -> RunSummary | None:
            # The window's own session on its own engine thread, with no listener and nothing
            # streamed into the window: the arms differ by the window alone. (A second session
            # on a thread of its own brought a second OpenMP team: with more managed threads
            # than cores libgomp cuts its spinning, and every decode of both arms ran ~50 %
            # slower than with one team, which is not the window a user runs.)
            return await window.bridge.run_on_session(
                lambda session: headless_run(session, cfg.n_predict))

        lags: list[float] = []
        refresh: list[float] = []
        ui_runs: list[RunSummary | None] = []
        headless_runs: list[RunSummary | None] = []
        ui_cpu = UiCpu()
        await ui_run(window)  # warm-up, not counted
        await headless()
        for i in range(repeats):
            # ABBA: which arm goes first alternates, so a drift within a repeat (the machine
            # warming, a neighbour waking) does not favour either arm.
            arms = [(headless_runs, headless),
                    (ui_runs, lambda: ui_run(window, ui_cpu=ui_cpu))]
            for runs, run_arm in arms if i % 2 == 0 else arms[::-1]:
                runs.append(await run_arm())
            await ui_run(window, lags, refresh)
            say(f"run {i + 1}/{repeats}: window {rate(ui_runs[-1]):.1f} {RATE.unit}, "
                f"headless {rate(headless_runs[-1]):.1f} {RATE.unit}")
        say(f"decode ms/token (median): window {_median(ui_runs, decode_ms):.2f}, headless "
            f"{_median(headless_runs, decode_ms):.2f}; loop ms/token: window "
            f"{_median(ui_runs, _loop_ms):.3f}, headless {_median(headless_runs, _loop_ms):.3f}")
        return report(lags, [rate(r) for r in ui_runs], [rate(r) for r in headless_runs], cfg,
                      say, refresh, ui_cpu.share)

    return script


def _loop_ms(summary: RunSummary | None) -> float:
    return 1e3 * summary.loop_overhead_s_per_token if summary and summary.n_generated else -1.0


def _median(runs: list[RunSummary | None], figure: Callable[[RunSummary | None], float]
            ) -> float:
    values = [v for v in map(figure, runs) if v >= 0]
    return statistics.median(values) if values else -1.0


def percentile(values: list[float], q: float) -> float:
    """The value below which a share `q` of `values` lies (nearest rank; -1 for none)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else -1.0


def report(lags: list[float], ui_rates: list[float], headless_rates: list[float], cfg: Config,
           say: Callable[[str], None], refresh: list[float] | None = None,
           ui_cpu_share: float = -1.0) -> int:
    p99 = percentile(lags, 0.99)
    worst = max(lags) if lags else -1
    ui, headless = statistics.median(ui_rates), statistics.median(headless_rates)
    # Each repeat ran a headless and a window answer back to back: resampling those pairs
    # gives the ratio's interval on a machine whose speed drifts between repeats.
    ci = paired_ratio_ci(ui_rates, headless_rates)
    ratio = ci.estimate
    say(f"model {cfg.model}, {cfg.n_threads} threads, {cfg.n_predict} tokens per run, "
        f"{len(ui_rates)} runs of each kind (interleaved)")
    say(f"event-loop lag while generating: p99 {p99:.1f} ms, worst {worst:.1f} ms over "
        f"{len(lags)} probes (targets: p99 < {LAG_P99_MS:.0f} ms, worst < {LAG_MAX_MS:.0f} ms)")
    say(f"{RATE.unit} (engine time, median): window {ui:.2f}, headless {headless:.2f}; "
        f"window/headless over paired repeats {ci} (95% CI; target >= {RATIO_MIN})")
    if refresh:
        say(f"live plot refresh while generating: median {statistics.median(refresh):.2f} s, "
            f"p90 {percentile(refresh, 0.9):.2f} s, worst {max(refresh):.2f} s over "
            f"{len(refresh)} frames (target: every {REFRESH_MAX_S} s or sooner, 5 Hz)")
    else:
        say("live plot refresh while generating: no frame drawn during an answer (unmeasured)")
    if ui_cpu_share >= 0:
        say(f"UI thread CPU while answering: {100 * ui_cpu_share:.1f} % of one core (send to "
            "done, set-up and final render included)")
    else:
        say("UI thread CPU while answering: unmeasured")
    ok = p99 < LAG_P99_MS and worst < LAG_MAX_MS and ratio >= RATIO_MIN
    say("PASS" if ok else "FAIL: see the figures above")
    return 0 if ok else 1
