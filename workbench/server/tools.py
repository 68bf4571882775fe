"""Tool calls through the API: `tools`, `tool_choice`, `parallel_tool_calls`, past calls and
`role: tool` replies in, OpenAI's `tool_calls` (whole, or as stream deltas) out.

In: each tool is read by engine/tools/declared.py (the window's tools files are too): its
`parameters` schema must be one the grammar can enforce (the same check as `response_format`'s),
so a call's arguments always validate; a bad field is a 400 that names it. Out: calls carry ids
(the model's own where its format writes them, else `call_...`), `finish_reason:
"tool_calls"`. A stream holds back the answer from where a call may open (the
format's opening text), so call markup never reaches the client as text.
"""

from __future__ import annotations

import json
from typing import Any

from workbench.engine.tools.calls import AUTO, NONE, REQUIRED, ToolCall, ToolCalling
from workbench.engine.tools.declared import ToolDeclarationError, declared_tools
from workbench.server.errors import bad_request


def parse_tools(data: dict[str, Any]) -> ToolCalling | None:
    """The request's ToolCalling (None without tools); ApiError 400 on a bad field."""
    raw = data.get("tools")
    choice = data.get("tool_choice")
    parallel = data.get("parallel_tool_calls", True)
    if not isinstance(parallel, bool):
        raise bad_request("'parallel_tool_calls' must be true or false", "parallel_tool_calls")
    if raw is None or raw == []:
        if choice not in (None, NONE, AUTO):
            raise bad_request("'tool_choice' needs 'tools'", "tool_choice")
        return None
    try:
        tools = declared_tools(raw)
    except ToolDeclarationError as exc:
        raise bad_request(str(exc), exc.param) from None
    names = [t.name for t in tools]
    for name in ("response_format", "grammar"):
        if data.get(name) not in (None, "", {"type": "text"}):
            raise bad_request(f"send either 'tools' or '{name}', not both", name)
    if choice is None or choice in (AUTO, NONE, REQUIRED):
        return ToolCalling(tools, choice or AUTO, parallel=parallel)
    function = choice.get("function") if isinstance(choice, dict) else None
    if (not isinstance(choice, dict) or choice.get("type") != "function"
            or not isinstance(function, dict) or not isinstance(function.get("name"), str)):
        raise bad_request("'tool_choice' must be 'none', 'auto', 'required' or "
                          '{"type": "function", "function": {"name": ...}}', "tool_choice")
    if function["name"] not in names:
        raise bad_request(f"tool_choice names {function['name']!r}, which is not in 'tools'",
                          "tool_choice")
    return ToolCalling(tools, REQUIRED, function=function["name"], parallel=parallel)


def past_calls(raw: Any, where: str) -> str:
    """An assistant message's `tool_calls`, checked, as the JSON text a conversation keeps."""
    if not isinstance(raw, list) or not raw:
        raise bad_request(f"{where} must be a non-empty array of calls", where)
    calls = []
    for j, call in enumerate(raw):
        at = f"{where}[{j}]"
        function = call.get("function") if isinstance(call, dict) else None
        if (not isinstance(function, dict) or not isinstance(function.get("name"), str)
                or not isinstance(call.get("id", ""), str)):
            raise bad_request(f'{at} must be {{"id", "type": "function", "function": '
                              '{"name", "arguments"}}', at)
        arguments = function.get("arguments", "{}")
        if isinstance(arguments, dict):  # some clients send the object itself
            arguments = json.dumps(arguments, ensure_ascii=False)
        if not isinstance(arguments, str):
            raise bad_request(f"{at}.function.arguments must be a string of JSON",
                              f"{at}.function.arguments")
        calls.append({"id": call.get("id", ""), "type": "function",
                      "function": {"name": function["name"], "arguments": arguments}})
    return json.dumps(calls, ensure_ascii=False)


def openai_calls(calls: tuple[ToolCall, ...]) -> list[dict[str, Any]]:
    return [{"id": c.id, "type": "function", "function": {"name": c.name,
                                                          "arguments": c.arguments}}
            for c in calls]


def call_deltas(calls: tuple[ToolCall, ...]) -> list[dict[str, Any]]:
    """Each call as one stream delta (its index, id, name and whole arguments): the `openai`
    client's accumulator rebuilds `tool_calls` from them."""
    return [{"tool_calls": [{"index": i, **call}]} for i, call in enumerate(openai_calls(calls))]


class CallHoldback:
    """A streamed answer's text, held back from where a tool call may open: from the first
    opener on (or from the start, for formats whose whole answer may be a call), and a tail
    that may still become an opener. What is held is sent at the end, as the parsed content."""

    def __init__(self, openers: tuple[str, ...]) -> None:
        self.openers = openers
        self.seen = ""  # the answer so far, as fed
        self.sent = ""  # of it, what went to the client
        self.holding = "" in openers  # from the start

    def feed(self, delta: str) -> str:
        self.seen += delta
        if self.holding:
            return ""
        if any(o in self.seen for o in self.openers):
            self.holding = True
            cut = min(self.seen.find(o) for o in self.openers if o in self.seen)
            return self._send(self.seen[:cut])
        keep = max((k for o in self.openers for k in range(1, len(o))
                    if self.seen.endswith(o[:k])), default=0)
        return self._send(self.seen[:len(self.seen) - keep])

    def _send(self, upto: str) -> str:
        fresh = upto[len(self.sent):] if upto.startswith(self.sent) else ""
        self.sent += fresh
        return fresh

    def finish(self, content: str) -> str:
        """The rest of the final content (the answer without its calls) not yet sent."""
        return content[len(self.sent):] if content.startswith(self.sent) else ""
