"""The engine bridge on a plain asyncio loop, against the real engine and the embedded model."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from workbench.engine.requests import (
    GenerateRequest,
    GenerateResult,
    SessionError,
    StopReason,
    TokenEvent,
)
from workbench.ui.bridge import EngineBridge, LoadCancelled


async def collect(bridge: EngineBridge, request: GenerateRequest, cancel_after: int = -1
                  ) -> tuple[list[TokenEvent], GenerateResult]:
    tokens: list[TokenEvent] = []
    result = None
    async for event in bridge.generate(request):
        if isinstance(event, TokenEvent):
            tokens.append(event)
            if len(tokens) == cancel_after:
                bridge.cancel()
        elif isinstance(event, GenerateResult):
            result = event
    assert result is not None
    return tokens, result


def test_generate_streams_on_one_engine_thread(model_config):
    async def main() -> None:
        bridge = EngineBridge()
        seen_threads: set[str] = set()
        progress: list[float] = []
        model = await bridge.open(model_config, progress.append)
        assert model.n_ctx == 512 and model.chat_mode and progress and progress[-1] == 1.0
        await bridge._call(lambda: seen_threads.add(threading.current_thread().name))
        # The session was opened on the engine thread: it is the session's own thread.
        assert await bridge._call(lambda: bridge._require().thread_id) == bridge.engine_thread_id
        tokens, result = await collect(bridge, GenerateRequest(text="Hi", n_predict=8))
        assert result.ok and result.summary.n_generated == len(tokens) > 0
        assert [t.metrics.step for t in tokens] == list(range(1, len(tokens) + 1))
        assert await bridge.kv_tokens() == result.summary.n_past
        await bridge.close()
        await bridge.close()  # idempotent
        assert seen_threads == {"engine"} and not bridge._engine.is_alive()

    asyncio.run(main())


def test_cancel_stops_and_the_next_turn_works(model_config):
    async def main() -> None:
        bridge = EngineBridge()
        await bridge.open(model_config)
        tokens, result = await collect(bridge, GenerateRequest(text="Count to fifty.",
                                                               n_predict=200), cancel_after=3)
        assert result.stop_reason is StopReason.STOPPED and 3 <= len(tokens) < 200
        assert not bridge.generating
        _, again = await collect(bridge, GenerateRequest(text="Hello", n_predict=4))
        assert again.ok and again.summary.n_generated == 4
        await bridge.close()

    asyncio.run(main())


def test_leaving_the_stream_early_cancels_and_waits(model_config):
    async def main() -> None:
        bridge = EngineBridge()
        await bridge.open(model_config)
        stream = bridge.generate(GenerateRequest(text="Tell a long story.", n_predict=300))
        async for event in stream:
            if isinstance(event, TokenEvent):
                break
        await stream.aclose()
        assert not bridge.generating
        held = await bridge._call(lambda: list(bridge._session.kv_tokens))
        assert held == []  # the stopped turn was rolled back by the engine
        await bridge.close()

    asyncio.run(main())


def test_a_bad_model_file_raises_a_readable_error(tmp_path: Path, model_config):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model at all")

    async def main() -> None:
        bridge = EngineBridge()
        with pytest.raises(SessionError, match="not a GGUF"):
            await bridge.open(model_config.replace(model=str(bad)))
        assert not bridge.loaded
        await bridge.open(model_config)  # the engine thread survived
        assert bridge.loaded
        await bridge.close()

    asyncio.run(main())


def test_loading_can_be_cancelled(model_config):
    async def main() -> None:
        bridge = EngineBridge()
        with pytest.raises(LoadCancelled):
            await bridge.open(model_config, lambda _fraction: bridge.cancel_open())
        assert not bridge.loaded
        with pytest.raises(SessionError, match="no model"):
            await bridge.kv_tokens()
        await bridge.close()

    asyncio.run(main())
