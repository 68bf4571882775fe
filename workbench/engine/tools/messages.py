"""A conversation with tools, as a chat template can show it.

Templates that know tools read them from the `tools` variable and print an assistant's
`tool_calls` and `role: tool` replies themselves. Others get what llama.cpp's polyfills give
them: the tools and the answer's JSON shape described in the system message (the generic
format), a past call written into the assistant's content as that JSON, a tool's reply sent as
a user message `{"tool_response": {...}}`.
"""

from __future__ import annotations

import json
from typing import Any

from workbench.engine.tools.calls import ToolCalling
from workbench.engine.tools.formats import ToolFormat

Message = dict[str, str]


def generic_instructions(calling: ToolCalling) -> str:
    """The system text that tells a model without a tool format what it may call and how."""
    tools = json.dumps([t.declared for t in calling.callable], ensure_ascii=False)
    call = '{"tool_calls": [{"name": "TOOL_NAME", "arguments": {...}}]}'
    if calling.forced:
        how = f"Answer by calling a tool, with one JSON object: {call}"
    else:
        how = (f"To call tools, answer with one JSON object: {call}. To answer the user "
               'directly, answer with {"response": "YOUR ANSWER"}.')
    return f"You can call these tools:\n{tools}\n{how}"


def tool_messages(messages: list[Message], source: str, calling: ToolCalling | None,
                  fmt: ToolFormat) -> list[Message]:
    """`messages` for a template of `source`: the generic format's instructions in the system
    message, past calls and tool replies as the template can show them."""
    out = [_polyfill(m, source) for m in messages]
    if calling is not None and calling.calls_allowed and (fmt.generic or "tools" not in source):
        # The generic format's instructions; a family template that does not show tools (the
        # DeepSeek R1 distills) gets them listed, the model's own format does the rest.
        text = (generic_instructions(calling) if fmt.generic else "You can call these tools:\n"
                + json.dumps([t.declared for t in calling.callable], ensure_ascii=False))
        if out and out[0].get("role") == "system":
            out[0] = {**out[0], "content": out[0].get("content", "") + "\n\n" + text}
        else:
            out.insert(0, {"role": "system", "content": text})
    return out


def _polyfill(message: Message, source: str) -> Message:
    role = message.get("role")
    if role == "assistant" and message.get("tool_calls") and "tool_calls" not in source:
        calls = json.loads(message["tool_calls"])
        text = json.dumps({"tool_calls": [
            {"name": c["function"]["name"], "arguments": _arguments(c["function"]["arguments"])}
            for c in calls]}, ensure_ascii=False)
        content = message.get("content", "")
        return {"role": "assistant", "content": (content + "\n" if content else "") + text}
    if role == "tool" and "'tool'" not in source and '"tool"' not in source:
        reply = {"tool": message.get("name", ""), "content": message.get("content", "")}
        if message.get("tool_call_id"):
            reply["tool_call_id"] = message["tool_call_id"]
        return {"role": "user", "content": json.dumps({"tool_response": reply},
                                                      ensure_ascii=False)}
    return message


def _arguments(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def template_calls(tool_calls_json: str, object_arguments: bool = True) -> list[dict[str, Any]]:
    """A message's `tool_calls` (JSON text, OpenAI's shape) as templates read them: the
    arguments an object (templates print them with `tojson`; their JSON text when not
    `object_arguments`), and `name`/`arguments` also at the call's top level (Qwen's and
    Hermes' templates read them there)."""
    calls = json.loads(tool_calls_json)
    out = []
    for call in calls:
        function = dict(call.get("function", {}))
        if object_arguments:
            function["arguments"] = _arguments(function.get("arguments", "{}"))
        out.append({**call, "function": function, "name": function.get("name"),
                    "arguments": function["arguments"]})
    return out
