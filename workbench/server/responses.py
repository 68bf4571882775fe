"""OpenAI's response and chunk shapes, filled from the engine's results (pure functions)."""

from __future__ import annotations

import time
from typing import Any

from workbench.engine.requests import GenerateResult, StopReason
from workbench.server.stop_filter import cut_at_stop
from workbench.server.telemetry import usage, x_workbench
from workbench.server.tools import call_deltas, openai_calls

FINISH = {StopReason.EOS: "stop", StopReason.LENGTH: "length", StopReason.STOPPED: "stop"}


def finish_reason(result: GenerateResult, stopped_by_string: bool = False) -> str:
    if result.tool_calls:
        return "tool_calls"
    return "stop" if stopped_by_string else FINISH.get(result.stop_reason, "stop")


def chat_response(rid: str, model: str, created: int, result: GenerateResult,
                  stops: tuple[str, ...], logprobs: dict[str, Any] | None = None
                  ) -> dict[str, Any]:
    text, hit = cut_at_stop(result.text, stops)
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if result.tool_calls:
        message["content"] = text or None  # as OpenAI: no text beside the calls is null
        message["tool_calls"] = openai_calls(result.tool_calls)
    if result.reasoning:
        message["reasoning_content"] = result.reasoning
    return {
        "id": rid, "object": "chat.completion", "created": created, "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": logprobs,
                     "finish_reason": finish_reason(result, hit)}],
        "usage": usage(result.summary), "x_workbench": _extra(result),
    }


def _extra(result: GenerateResult) -> dict[str, Any]:
    """x_workbench, and why text that opened a tool call was sent as text."""
    extra = x_workbench(result.summary)
    if result.tool_error:
        extra["tool_error"] = result.tool_error
    return extra


def completion_response(rid: str, model: str, created: int, result: GenerateResult,
                        stops: tuple[str, ...], logprobs: dict[str, Any] | None = None
                        ) -> dict[str, Any]:
    text, hit = cut_at_stop(result.text, stops)
    return {
        "id": rid, "object": "text_completion", "created": created, "model": model,
        "choices": [{"index": 0, "text": text, "logprobs": logprobs,
                     "finish_reason": finish_reason(result, hit)}],
        "usage": usage(result.summary), "x_workbench": x_workbench(result.summary),
    }


class ChunkMaker:
    """The chunks of one streamed response (chat or completion), all with the same id."""

    def __init__(self, kind: str, rid: str, model: str) -> None:
        self.kind = kind
        self.base = {"id": rid, "created": int(time.time()), "model": model,
                     "object": "chat.completion.chunk" if kind == "chat" else "text_completion"}

    def _chunk(self, choice: dict[str, Any], finish: str | None = None,
               logprobs: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
        choice = {"index": 0, **choice, "logprobs": logprobs, "finish_reason": finish}
        return {**self.base, "choices": [choice], **extra}

    def role(self) -> dict[str, Any]:
        return self._chunk({"delta": {"role": "assistant", "content": ""}})

    def calls(self, result: GenerateResult) -> list[dict[str, Any]]:
        """The answer's tool calls, one delta chunk each."""
        return [self._chunk({"delta": d}) for d in call_deltas(result.tool_calls)]

    def delta(self, answer: str, reasoning: str = "", logprobs: dict[str, Any] | None = None
              ) -> dict[str, Any]:
        if self.kind != "chat":
            return self._chunk({"text": answer}, logprobs=logprobs)
        delta: dict[str, str] = {}
        if reasoning:
            delta["reasoning_content"] = reasoning
        if answer:
            delta["content"] = answer
        return self._chunk({"delta": delta}, logprobs=logprobs)

    def finish(self, result: GenerateResult, stopped_by_string: bool, with_usage: bool,
               logprobs: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """The last chunks: the finish reason (with x_workbench and the log-probabilities of
        tokens no earlier chunk carried), then usage if asked for."""
        empty = {"delta": {}} if self.kind == "chat" else {"text": ""}
        extra = {"x_workbench": _extra(result)}
        last = [self._chunk(empty, finish_reason(result, stopped_by_string), logprobs=logprobs,
                            **extra)]
        if with_usage:
            last.append({**self.base, "choices": [], "usage": usage(result.summary), **extra})
        return last


class DeltaTracker:
    """What of the answer and the reasoning is new since the last event, from the snapshots
    each token carries. When the parser reclassifies earlier text (a reasoning close with no
    open), the reasoning is sent whole, so the streamed reasoning is the final one; the answer
    text already sent cannot be taken back, and the tracker goes on from the new snapshot."""

    def __init__(self) -> None:
        self.answer = ""
        self.reasoning = ""

    def update(self, answer: str, reasoning: str) -> tuple[str, str]:
        new_answer = answer[len(self.answer):] if answer.startswith(self.answer) else ""
        new_reasoning = (reasoning[len(self.reasoning):] if reasoning.startswith(self.reasoning)
                         else "")
        self.answer, self.reasoning = answer, reasoning
        return new_answer, new_reasoning
