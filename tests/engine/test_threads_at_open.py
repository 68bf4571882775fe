"""The thread count is chosen, not assumed (issue 38), on the real engine and the tiny MoE: a
streamed model whose count nobody chose is measured at open and runs on the choice (read back
from llama.cpp), an explicit count is never measured, and the choice reaches `chat`'s lines and
the window's load. No timing is asserted: which count wins is the machine's business."""

from __future__ import annotations

import asyncio
import subprocess
import sys

from workbench.engine.opening import settle_threads
from workbench.engine.requests import GenerateRequest

STREAMED = {"moe_stream": True, "cache_mb": 1, "n_ctx": 256, "n_predict": 8}


def _ctx_threads(session) -> int:
    """What llama.cpp holds (llama_n_threads), not what the config says."""
    return session._p.ctx.n_threads


def test_a_streamed_model_runs_on_the_measured_count(open_session, tiny_moe_path):
    session = open_session(model=str(tiny_moe_path), n_threads=1, **STREAMED)
    assert _ctx_threads(session) == 1
    choice = settle_threads(session, measure=True, cores=2)
    assert choice is not None and set(choice.s_per_token) == {1, 2}
    assert choice.probe_seconds > 0 and "fastest measured at open" in choice.reason
    assert _ctx_threads(session) == choice.threads == session.config.n_threads
    assert session.run_info.settings["n_threads"] == choice.threads  # the metrics file's
    assert session.thread_choice is choice
    # The context applies a count set after the load: the other candidate, read back.
    other = 2 if choice.threads == 1 else 1
    session.set_threads(other)
    assert _ctx_threads(session) == other
    session.set_threads(choice.threads)
    # The measurement leaves no conversation behind, and a turn runs as usual.
    result = session.generate(GenerateRequest(text="Hello", n_predict=4, new_chat=True))
    assert result.ok and result.summary.n_generated > 0
    assert result.summary.n_reused == 0  # nothing of the probe text was taken for it


def test_an_explicit_count_is_kept_unmeasured(open_session, tiny_moe_path):
    session = open_session(model=str(tiny_moe_path), n_threads=1, **STREAMED)
    choice = settle_threads(session, measure=False, cores=2)
    assert choice is not None and choice.threads == 1 == _ctx_threads(session)
    assert choice.s_per_token == {} and "set explicitly" in choice.reason


def test_chat_says_how_its_count_was_decided(tiny_moe_path):
    base = [sys.executable, "-m", "workbench", "chat", "-m", str(tiny_moe_path), "-p", "Hi",
            "-n", "4", "--moe-stream", "--cache-mb", "1", "-c", "256"]
    measured = subprocess.run(base, capture_output=True, text=True, timeout=300)
    assert measured.returncode == 0, measured.stderr
    assert "fastest measured at open" in measured.stderr
    assert "s at open)" in measured.stderr  # the probe's cost, beside the choice
    typed = subprocess.run([*base, "-t", "1"], capture_output=True, text=True, timeout=300)
    assert typed.returncode == 0, typed.stderr
    assert "threads: 1 compute thread (set explicitly" in typed.stderr
    assert "fastest measured" not in typed.stderr


def test_the_windows_load_measures_and_reports(tiny_moe_path):
    from workbench.config import Config
    from workbench.ui.bridge import EngineBridge

    config = Config(model=str(tiny_moe_path), n_threads=1, **STREAMED)

    async def main() -> None:
        bridge = EngineBridge()
        try:
            model = await bridge.open(config, measure_threads=True)
            assert model.thread_choice is not None
            assert model.config.n_threads == model.thread_choice.threads
            assert await bridge._call(lambda: _ctx_threads(bridge._require())) == (
                model.thread_choice.threads)
            kept = await bridge.open(config, measure_threads=False)
            assert kept.config.n_threads == 1 and "set explicitly" in kept.thread_choice.reason
        finally:
            await bridge.close()

    asyncio.run(main())
