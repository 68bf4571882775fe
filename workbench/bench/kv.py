"""`bench kv`: what keeping each conversation's KV state saves, in time to first token.

Two conversations of about 2,000 tokens each. The question is how long a new short question in
conversation A takes to its first token after conversation B had the context:
- memory: the session's KV pool kept A's state; it is restored, and only the question is read;
- off: no pool (kv_pool_mb=0); A's whole history is read again;
and after a restart:
- disk: A's state was spilled when the first session closed; a new session restores it;
- re-prefill: a new session without a spill reads A's history.
The arms of each pair run back to back and their order alternates (ABBA); each repeat opens
fresh sessions. The ratio of a pair is the slower arm's TTFT summed over repeats over the faster
one's, with a 95 % interval from resampling the repeats (bench/stats.py). TTFT is the engine's
own figure: request start to the first generated token, restore included. The disk arm reads a
file the page cache still holds (it was just written); a cold read adds the disk's time.
Each arm runs whole (open, turns, close) on the bench engine thread (bench/engine.py), as chat's
sessions do.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from workbench.bench.engine import on_engine
from workbench.bench.stats import Interval, paired_ratio_ci
from workbench.config import Config
from workbench.engine.requests import GenerateRequest
from workbench.engine.session import Session

QUESTION = "In one word: which of these came first?"
PRIMER = "Summarise what we talked about in one sentence."
_WORDS = (
    "river", "lantern", "harbour", "orchard", "granite", "meadow", "compass", "signal", "archive",
    "valley", "ember", "quarry", "beacon", "thistle", "cobalt", "lattice", "monsoon", "juniper",
    "falcon", "tundra", "saffron", "glacier", "prairie", "citadel", "mosaic", "canyon",
)


@dataclass
class KvReport:
    ttft: dict[str, list[float]] = field(default_factory=dict)  # arm -> seconds per repeat
    memory: Interval | None = None  # off / memory
    disk: Interval | None = None  # re-prefill / disk
    history_tokens: int = 0
    # The composer's forecast against the turn it forecast, in the re-read arm (a real prefill
    # of the whole history, with the rate measured on this session's earlier turns).
    forecast_s: list[float] = field(default_factory=list)
    prefill_s: list[float] = field(default_factory=list)
    forecast_tokens_exact: bool = True

    def last_line(self) -> str:
        assert self.memory is not None and self.disk is not None
        return f"kv ratio memory={self.memory.estimate:.2f} disk={self.disk.estimate:.2f}"


def conversation(seed: int, target_tokens: int, count: Callable[[str], int]
                 ) -> list[dict[str, str]]:
    """A made-up conversation of about `target_tokens` tokens (user and assistant turns)."""
    rng = random.Random(seed)
    history: list[dict[str, str]] = []
    total = 0
    while total < target_tokens:
        for role in ("user", "assistant"):
            text = " ".join(rng.choice(_WORDS) for _ in range(60)).capitalize() + "."
            history.append({"role": role, "content": text})
            total += count(text) + 8  # the template's markers around a message
    return history


def _primed(session: Session, history: list[dict[str, str]], key: str
            ) -> list[dict[str, str]]:
    """One turn of conversation `key` on `history` (its KV now holds it); the history after."""
    result = session.generate(GenerateRequest(text=PRIMER, history=tuple(history), n_predict=8,
                                              conversation=key))
    if not result.ok:
        raise RuntimeError(f"priming conversation {key} failed: {result.error}")
    return list(result.history)


def _ttft(session: Session, history: list[dict[str, str]], key: str,
          report: KvReport | None = None) -> tuple[float, str]:
    request = GenerateRequest(text=QUESTION, history=tuple(history), n_predict=1,
                              conversation=key)
    forecast = session.forecast(request) if report is not None else None
    result = session.generate(request)
    if not result.ok or result.summary is None:
        raise RuntimeError(f"the measured turn failed: {result.error}")
    if report is not None and forecast is not None:
        report.forecast_s.append(forecast.seconds)
        report.prefill_s.append(result.summary.prefill_seconds)
        report.forecast_tokens_exact &= forecast.n_to_process == result.summary.n_prompt
    return result.summary.ttft_seconds, result.summary.kv_source


def switch_back(config: Config, a: list, b: list, report: KvReport | None = None
                ) -> tuple[float, str]:
    """A, then B, then a new question in A: its TTFT and how its prompt was served."""
    with Session.open(config, kv_dir=None) as s:
        a_after = _primed(s, a, "a")
        _primed(s, b, "b")
        return _ttft(s, a_after, "a", report)


def after_restart(config: Config, a: list, spill: bool) -> tuple[float, str]:
    """A, close, a new session, a new question in A (with or without the disk spill)."""
    with tempfile.TemporaryDirectory(prefix="workbench-bench-kv-") as tmp:
        kv_dir = Path(tmp) if spill else None
        with Session.open(config, kv_dir=kv_dir) as first:
            a_after = _primed(first, a, "a")
        with Session.open(config, kv_dir=kv_dir) as second:
            # A new context's first decode pays one-time costs (buffers, first touches of the
            # weights) that either arm would pay: paid here, outside the measured turn.
            second.generate(GenerateRequest(text="Hi", n_predict=1, conversation="warm-up"))
            return _ttft(second, a_after, "a")


def run_kv(config: Config, *, repeats: int, history_tokens: int,
           log: Callable[[str], None]) -> KvReport:
    pool_on = config.replace(kv_pool_mb=max(config.kv_pool_mb, 512), kv_disk_mb=2048)
    pool_off = config.replace(kv_pool_mb=0, kv_disk_mb=0)
    def conversations() -> tuple[list, list]:
        with Session.open(config, kv_dir=None) as probe:
            def count(text: str) -> int:
                return len(probe._p.model.tokenize(text, add_special=False, parse_special=False))
            return conversation(1, history_tokens, count), conversation(2, history_tokens, count)

    a, b = on_engine(conversations)
    report = KvReport(ttft={"memory": [], "off": [], "disk": [], "re-prefill": []},
                      history_tokens=history_tokens)
    arms: dict[str, Callable[[], tuple[float, str]]] = {
        "memory": lambda: switch_back(pool_on, a, b),
        "off": lambda: switch_back(pool_off, a, b, report),
        "disk": lambda: after_restart(pool_on, a, spill=True),
        "re-prefill": lambda: after_restart(pool_off, a, spill=False),
    }
    expected = {"memory": "memory", "off": "fresh", "disk": "disk", "re-prefill": "fresh"}
    for pair in (("memory", "off"), ("disk", "re-prefill")):
        on_engine(arms[pair[0]])  # warm-up: page cache, allocator, first-use costs
        for i in range(repeats):
            order = pair if i % 2 == 0 else pair[::-1]
            for arm in order:
                seconds, source = on_engine(arms[arm])
                if source != expected[arm]:
                    raise RuntimeError(f"arm {arm} served its prompt from {source!r}, "
                                       f"not {expected[arm]!r}: the comparison would be void")
                report.ttft[arm].append(seconds)
                log(f"repeat {i + 1} {arm}: TTFT {seconds * 1000:.0f} ms ({source})")
    # The warm-up's pair has no "off" run, so every forecast recorded is a measured repeat.
    report.memory = paired_ratio_ci(report.ttft["off"], report.ttft["memory"])
    report.disk = paired_ratio_ci(report.ttft["re-prefill"], report.ttft["disk"])
    return report


def format_report(report: KvReport) -> list[str]:
    def mean_ms(arm: str) -> str:
        values = report.ttft[arm]
        return f"{1000 * sum(values) / len(values):.0f} ms"

    errors = [f / p - 1 for f, p in zip(report.forecast_s, report.prefill_s, strict=True)
              if f >= 0 and p > 0]
    tokens = "exact" if report.forecast_tokens_exact else "NOT EXACT"
    forecast = (f"forecast of the re-read: tokens {tokens}, seconds within "
                f"{100 * max(abs(e) for e in errors):.0f} % "
                f"(mean {100 * sum(errors) / len(errors):+.0f} %)" if errors
                else "forecast of the re-read: no rate measured")
    return [
        forecast,
        f"conversations of ~{report.history_tokens} tokens, "
        f"{len(report.ttft['memory'])} repeats per arm",
        f"switch back: kept in memory {mean_ms('memory')} vs re-read {mean_ms('off')}: "
        f"{report.memory}x",
        f"after a restart: restored from disk {mean_ms('disk')} vs re-read "
        f"{mean_ms('re-prefill')}: {report.disk}x",
    ]
