"""One turn's tool calling on the engine: the grammar it decodes under, the calls read back."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING

from workbench.engine.constrain import Decoding
from workbench.engine.tools.calls import ToolCall, ToolCalling
from workbench.engine.tools.formats import ToolFormat, detect_tool_format

if TYPE_CHECKING:
    from workbench.engine.chat.template import ChatTemplate
    from workbench.engine.requests import GenerateResult


def new_call_id() -> str:
    return "call_" + uuid.uuid4().hex[:24]


def calls_json(calls: tuple[ToolCall, ...]) -> str:
    """Calls as a conversation keeps them (OpenAI's `tool_calls`, JSON text)."""
    return json.dumps([{"id": c.id, "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments}} for c in calls],
                      ensure_ascii=False)


class ToolTurn:
    def __init__(self, calling: ToolCalling, fmt: ToolFormat) -> None:
        self.calling, self.fmt = calling, fmt

    @classmethod
    def of(cls, calling: ToolCalling | None, template: ChatTemplate | None,
           raw: bool) -> ToolTurn | None:
        """None when the turn may call nothing (no tools, tool_choice none, a raw prompt)."""
        if calling is None or not calling.calls_allowed or raw:
            return None
        return cls(calling, detect_tool_format(template.source if template else None))

    def decoding(self, base: Decoding | None) -> Decoding:
        """The turn's decoding with the calls' grammar (lazy unless the call is forced);
        SchemaError when a tool's parameters cannot be enforced."""
        grammar = self.fmt.grammar(self.calling)
        return replace(base or Decoding(), grammar=grammar.gbnf, grammar_root="root",
                       triggers=grammar.triggers)

    def read(self, result: GenerateResult) -> None:
        """The calls of a finished answer into `result.tool_calls`, the text around them into
        `result.text`; a call that cannot be read leaves the text whole, and says why."""
        if not result.ok or result.stopped:
            return
        parsed = self.fmt.parse(result.text)
        if not parsed.calls and not parsed.malformed and self.fmt.in_reasoning:
            in_reasoning = self.fmt.parse(result.reasoning)
            if in_reasoning.calls:
                result.reasoning = in_reasoning.content
                parsed = replace(in_reasoning, content=result.text)
        if parsed.malformed:
            result.tool_error = parsed.malformed
            return
        unknown = [c.name for c in parsed.calls if c.name not in self.calling.names()]
        if unknown:
            result.tool_error = f"the model called {unknown[0]!r}, which is not a declared tool"
            return
        if parsed.calls or self.fmt.generic:
            result.text = parsed.content
        result.tool_calls = tuple(c if c.id else replace(c, id=new_call_id())
                                  for c in parsed.calls)

    def keep(self, result: GenerateResult) -> None:
        """The calls in the conversation after the turn: on its answer, as `tool_calls`."""
        if not result.tool_calls or not result.history:
            return
        *before, answer = result.history
        if answer.get("role") == "assistant":
            result.history = (*before, {**answer, "tool_calls": calls_json(result.tool_calls)})
