"""A bridge that replays a scripted token stream through the REAL reasoning parser.

The embedded model does not reason, so the reasoning block is driven here by a real template
from llama.cpp's corpus and the engine's own ReasoningParser; only decoding is scripted. The
test releases tokens one at a time (`release`) to look at the window mid-stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from workbench.config import Config
from workbench.engine.chat.reasoning import detect_reasoning_format, parser_for_prompt
from workbench.engine.chat.template import ChatTemplate
from workbench.engine.metrics import RunSummary, TokenMetrics
from workbench.engine.requests import GenerateRequest, GenerateResult, StopReason, TokenEvent
from workbench.ui.bridge import LoadedModel


class ScriptedBridge:
    def __init__(self, template: ChatTemplate, pieces: list[str]) -> None:
        self.template = template
        self.pieces = pieces
        self.released = asyncio.Semaphore(0)
        self.generating = False
        self.loaded = True
        self.history: list[dict[str, str]] = []  # the last request's

    def release(self, n: int = 1) -> None:
        for _ in range(n):
            self.released.release()

    def model(self, config: Config) -> LoadedModel:
        info = {"engine_version": "scripted", "model": {"name": "scripted", "path": ""},
                "settings": config.to_dict()}
        return LoadedModel(config=config, name="scripted", path="", arch="qwen3", n_ctx=4096,
                           chat_mode=True, think_control="template", template_origin="test",
                           load_seconds=0.0, run_info=info, is_moe=False)

    async def open(self, config: Config, on_progress: Any = None,
                   measure_threads: bool = False) -> LoadedModel:
        """The window's load path, with nothing to load."""
        return self.model(config)

    async def kv_states(self) -> list:
        return []

    async def kv_tokens(self) -> int:
        return 100

    def cancel(self) -> None:
        pass

    def cancel_open(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def generate(self, request: GenerateRequest, stop: Any = None) -> AsyncIterator[Any]:
        self.history = list(request.history)  # the conversation the window sent
        messages = [*self.history, {"role": "user", "content": request.text}]
        prompt = self.template.render(messages, add_generation_prompt=True,
                                      enable_thinking=True)
        parser = parser_for_prompt(detect_reasoning_format(self.template), prompt)
        self.generating = True
        answer = reasoning = ""
        for step, piece in enumerate(self.pieces, start=1):
            await self.released.acquire()
            delta = parser.feed(piece)
            if delta is not None:
                answer, reasoning = delta.answer, delta.reasoning
            metrics = TokenMetrics(step=step, steps=len(self.pieces), turn=0, wall_ms=250.0,
                                   cpu_ms=250.0, majflt=0, majflt_mib=0.0, loop_overhead_ms=0.1,
                                   compute_ms=250.0, piece=piece, text=answer,
                                   reasoning=reasoning)
            yield TokenEvent(metrics, delta.answer_delta if delta else "",
                             delta.reasoning_delta if delta else "", bool(delta and delta.reset))
        final = parser.finish()
        n = len(self.pieces)
        summary = RunSummary(turn=0, n_generated=n, gen_seconds=n * 0.25, n_prompt=20,
                             n_reused=0, n_past=20 + n, n_ctx=4096, load_seconds=0.0,
                             prefill_seconds=0.05, ttft_seconds=0.3, majflt_per_token=0.0,
                             cpu_s_per_token=0.25, loop_overhead_s_per_token=0.0001,
                             stop_reason="eos")
        self.generating = False
        yield GenerateResult(ok=True, stop_reason=StopReason.EOS, text=final.answer,
                             reasoning=final.reasoning, summary=summary)
