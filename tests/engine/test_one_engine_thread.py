"""Every entry point opens, generates, resizes and closes a session on one thread (issue 14 §1).

A session opened on one thread and used on another makes two OpenMP pools fight over the cores.
The session's guard turns that into a WrongThreadError; these tests show the guard fires (the
negative control) and that each entry point's engine work runs on one thread, which is not the
caller's (chat, the window's bridge, the benches: the calling thread only waits).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from workbench.config import Config
from workbench.engine.engine_thread import EngineThread, WrongThreadError
from workbench.engine.requests import GenerateRequest, StopReason
from workbench.engine.session import Session

Call = tuple[str, int]  # (method, threading.get_ident() of the thread that made it)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[Call]:
    """Every Session.open/generate/set_cache_budget_mib/close, with the thread it ran on (the
    real methods run; the wrappers only write down the thread)."""
    log: list[Call] = []
    real_open = Session.open.__func__

    def open_(cls, config, **options):
        log.append(("open", threading.get_ident()))
        return real_open(cls, config, **options)

    monkeypatch.setattr(Session, "open", classmethod(open_))
    for name in ("generate", "set_cache_budget_mib", "close"):
        real = getattr(Session, name)

        def recorded(self, *args, _name=name, _real=real, **kwargs):
            log.append((_name, threading.get_ident()))
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(Session, name, recorded)
    return log


def on_other_thread(fn: Callable[[], object]) -> BaseException | None:
    """What `fn()` raises when run on a new thread (None if nothing)."""
    box: dict[str, BaseException] = {}

    def run() -> None:
        try:
            fn()
        except BaseException as exc:
            box["error"] = exc

    t = threading.Thread(target=run, name="intruder")
    t.start()
    t.join(60)
    assert not t.is_alive()
    return box.get("error")


def moe_config(model: Path, **changes: object) -> Config:
    return Config(model=str(model), chat_template=False, n_ctx=256, n_threads=2, n_predict=4,
                  **changes)


# ---- the guard ---------------------------------------------------------------------------------


def test_a_session_refuses_every_engine_call_from_another_thread(tiny_moe_path, open_session):
    s = open_session(model=str(tiny_moe_path), chat_template=False, n_ctx=256, n_predict=4,
                     moe_stream=True, cache_mb=4)
    assert s.thread_id == threading.get_ident()
    before = s.generate(GenerateRequest(text="one two three"))
    assert before.ok
    refused = {
        "generate": lambda: s.generate(GenerateRequest(text="four")),
        "set_cache_budget_mib": lambda: s.set_cache_budget_mib(2),
        "close": s.close,
        "reset_conversation": s.reset_conversation,
        "forecast": lambda: s.forecast(GenerateRequest(text="five")),
        "set_session_settings": lambda: s.set_session_settings(s.config),
    }
    for name, call in refused.items():
        error = on_other_thread(call)
        assert isinstance(error, WrongThreadError), name
        message = str(error)
        assert f"Session.{name}()" in message and "'intruder'" in message
        assert threading.current_thread().name in message and "EngineThread" in message
    # Nothing was done by the refused calls: the session is open, its KV untouched.
    assert s.kv_tokens and s.streaming.budget.mib == pytest.approx(4)
    # cancel() is the one call any thread may make: spent by the next generation.
    assert on_other_thread(s.cancel) is None
    assert s.generate(GenerateRequest(text="six")).stop_reason is StopReason.STOPPED
    again = s.generate(GenerateRequest(text="seven", new_chat=True))
    assert again.ok and again.summary.n_generated == 4


def test_take_thread_moves_the_session_and_the_old_thread_is_refused(tiny_moe_path):
    with EngineThread("other") as other:
        s = Session.open(moe_config(tiny_moe_path))
        try:
            other.call(s.take_thread)
            assert s.thread_id == other.ident
            with pytest.raises(WrongThreadError):
                s.generate(GenerateRequest(text="hello"))
            assert other.call(lambda: s.generate(GenerateRequest(text="hello"))).ok
        finally:
            other.call(s.close)


def test_the_engine_thread_runs_calls_in_order_and_returns_their_outcome():
    with EngineThread("engine") as engine:
        idents = [engine.call(threading.get_ident) for _ in range(3)]
        assert set(idents) == {engine.ident} and engine.ident != threading.get_ident()
        with pytest.raises(ValueError, match="bad"):
            engine.call(lambda: (_ for _ in ()).throw(ValueError("bad")))
        assert engine.call(lambda: 7) == 7  # an exception does not end the thread
        assert engine.call(lambda: engine.call(lambda: 8)) == 8  # re-entrant, no deadlock
    assert not engine.is_alive()


# ---- every entry point -------------------------------------------------------------------------


def one_engine_thread(calls: list[Call]) -> int:
    """The one thread every recorded call ran on, which is not this (the caller's) thread."""
    threads = {ident for _, ident in calls}
    assert len(threads) == 1, calls
    (ident,) = threads
    assert ident != threading.get_ident()
    return ident


def test_chat_opens_generates_and_closes_on_its_engine_thread(tiny_moe_path, calls, capsys):
    from workbench.cli.main import build_parser

    args = build_parser().parse_args(["chat", "-m", str(tiny_moe_path), "--raw", "-n", "4",
                                      "--n-ctx", "256", "--moe-stream", "--cache-mb", "4",
                                      "-p", "Hello"])
    assert args.run(args) == 0, capsys.readouterr().err
    assert [name for name, _ in calls] == ["open", "generate", "close"]
    one_engine_thread(calls)


def test_the_window_bridge_opens_generates_and_closes_on_its_engine_thread(
        tiny_moe_path, calls):
    from workbench.ui.bridge import EngineBridge

    async def main() -> int | None:
        bridge = EngineBridge()
        await bridge.open(moe_config(tiny_moe_path, moe_stream=True, cache_mb=4))
        async for _ in bridge.generate(GenerateRequest(text="Hi")):
            pass
        ident = bridge.engine_thread_id
        await bridge.close()
        return ident

    ident = asyncio.run(main())
    assert [name for name, _ in calls] == ["open", "generate", "close"]
    assert one_engine_thread(calls) == ident


def test_bench_stream_machinery_runs_on_the_bench_engine_thread(tiny_moe_path, calls):
    from workbench.bench import stream
    from workbench.bench.engine import engine

    line = stream.machinery(tiny_moe_path, repeats=1, n_tokens=4, threads=2, log=lambda _: None)
    assert line.startswith("stream machinery ratio=")
    assert one_engine_thread(calls) == engine().ident
    assert [n for n, _ in calls].count("open") == 2


def test_bench_stream_threads_arm_measures_both_arrangements(tiny_moe_path, calls):
    from workbench.bench import stream
    from workbench.bench.engine import engine

    out = stream.entry_threads(tiny_moe_path, cache_mb=0, repeats=2, n_tokens=4, threads=2,
                               log=lambda _: None)
    lines = out.splitlines()
    assert [ln.split(" ratio=")[0] for ln in lines] == [
        "stream threads same/resident", "stream threads split/resident",
        "stream threads split/same", "stream threads switches split/same"]
    assert "hit_pct=100.0 hit_goal_met=yes" in lines[0]  # the cache holds every expert
    per_token = [float(f.split("=")[1]) for f in lines[3].split() if "_per_token=" in f]
    assert len(per_token) == 3 and all(n >= 0 for n in per_token)
    # Resident and same-thread: opened on the engine thread; split: opened here, on the
    # caller's thread. Every turn and every close: on the engine thread.
    opens = [ident for name, ident in calls if name == "open"]
    assert opens == [engine().ident, engine().ident, threading.get_ident()]
    assert {ident for name, ident in calls if name != "open"} == {engine().ident}


def test_bench_matrix_runs_run_on_the_bench_engine_thread(tiny_moe_path, calls, tmp_path):
    from workbench.bench.engine import engine
    from workbench.bench.matrix import generate_all

    n = generate_all(moe_config(tiny_moe_path), ["one", "two"], tmp_path / "run.csv")
    assert n == 8 and (tmp_path / "run.csv").exists()
    assert [name for name, _ in calls] == ["open", "generate", "generate", "close"]
    assert one_engine_thread(calls) == engine().ident


def test_bench_overhead_runs_on_the_bench_engine_thread(tiny_moe_path, calls):
    from workbench.bench.engine import engine
    from workbench.bench.overhead import run_overhead

    report = run_overhead(moe_config(tiny_moe_path), repeats=1, warmup=0, log=lambda _: None)
    assert report.engine[0].tokens == report.raw[0].tokens == 4
    assert one_engine_thread(calls) == engine().ident


def test_bench_kv_runs_on_the_bench_engine_thread(embedded_model_path, calls):
    from workbench.bench.engine import engine
    from workbench.bench.kv import run_kv

    config = Config(model=str(embedded_model_path), n_threads=2, n_ctx=1024)
    report = run_kv(config, repeats=1, history_tokens=60, log=lambda _: None)
    assert report.memory is not None and report.disk is not None
    assert one_engine_thread(calls) == engine().ident
