"""A conversation's tools as its turns use them (Qt-free): the `tools` and `tool_choice`
settings (config.py) read into the engine's ToolCalling, the same value the server builds from a
request's `tools` (server/tools.py), and an answer's stored calls read back for the blocks that
show them (ui/chat/qt_tool_call_block.py)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from workbench.config import Config
from workbench.engine.tools.calls import ToolCall, ToolCalling
from workbench.ui.chat.context import call_ids
from workbench.ui.chat.tools_file import ToolsFile, parse_tools


def tools_of(config: Config) -> ToolsFile | None:
    """The conversation's tools (None: it has none); ToolsFileError when the stored value is
    not a usable declaration (pasted by hand, or another version's)."""
    if not config.tools.strip():
        return None
    return parse_tools(config.tools, "the conversation's tools")


def calling_of(config: Config) -> ToolCalling | None:
    """What a turn of this conversation may call, and how (tool_choice); None: no tools."""
    tools = tools_of(config)
    if tools is None or not tools.tools:
        return None
    # One call per answer: the user answers each call by hand, and a small model allowed
    # several repeats calls until its token limit cuts the last one (seen on gemma-3-270m).
    # The model goes on from the result and may call again.
    return ToolCalling(tools.tools, config.tool_choice, parallel=False)


def stored_calls(tool_calls: str) -> tuple[ToolCall, ...]:
    """An answer's calls as it keeps them (engine/tools/turn.calls_json), parsed again."""
    if not tool_calls:
        return ()
    out = []
    for call in json.loads(tool_calls):
        function = call.get("function", {}) if isinstance(call, dict) else {}
        out.append(ToolCall(name=str(function.get("name", "")),
                            arguments=str(function.get("arguments", "{}")),
                            id=str(call.get("id", ""))))
    return tuple(out)


def pending_answer(path: Sequence[Any]) -> Any | None:
    """The answer whose calls wait for results: the last answer of `path` that made calls,
    followed only by results of them, not all of its calls answered yet."""
    for i in range(len(path) - 1, -1, -1):
        message = path[i]
        if message.role == "tool":
            continue
        if message.role != "assistant" or message.status != "complete":
            return None
        calls = call_ids(getattr(message, "tool_calls", ""))
        answered = {getattr(m, "tool_call_id", "") for m in path[i + 1:]}
        return message if calls and not set(calls) <= answered else None
    return None
