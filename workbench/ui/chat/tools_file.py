"""A conversation's tools file (Qt-free): the tools its model may call, as OpenAI declares them
(a JSON array of `{"type": "function", "function": {name, description, parameters}}`, the same
reader as the API's `tools`: engine/tools/declared.py), and for each tool, optionally, the local
command that answers its calls.

The command is this file's own extension key beside "type" (it never reaches the model):
`"x-workbench-command": ["python3", "weather.py"]`, an argument vector run without a shell; a
call's arguments (JSON text) are appended as its last argument. It runs only after the user
confirms the exact command line (ui/chat/qt_tool_call_block.py).

A file that cannot be used is a ToolsFileError that says what is wrong and where; nothing of it
is taken.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.engine.tools.calls import Tool
from workbench.engine.tools.declared import ToolDeclarationError, declared_tools
from workbench.file_kind import TextFileError, read_utf8_text

COMMAND_KEY = "x-workbench-command"
MAX_TOOLS_FILE_BYTES = 1 << 20


class ToolsFileError(ValueError):
    """Why a tools file cannot be used, in one sentence with the fix."""


@dataclass(frozen=True, slots=True)
class ToolsFile:
    tools: tuple[Tool, ...]
    # tool name -> the command (argument vector) that answers its calls; absent: the user pastes
    commands: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # The file's array as compact JSON text, commands included: what a conversation keeps (its
    # `tools` setting), read back by parse_tools.
    declaration: str = ""


def read_tools_file(path: str | Path) -> ToolsFile:
    """The tools declared in `path` (disk: call it off the UI thread)."""
    name = Path(path).name
    try:
        if Path(path).is_file() and Path(path).stat().st_size > MAX_TOOLS_FILE_BYTES:
            raise ToolsFileError(f"the tools file {name} is larger than 1 MiB; choose a JSON "
                                 "file of tool declarations")
        text = read_utf8_text(path)
    except TextFileError as exc:
        raise ToolsFileError(exc.sentence(f"the tools file {name}") + "; choose a JSON file "
                             "of tool declarations") from None
    except OSError as exc:
        raise ToolsFileError(f"cannot read the tools file {name}: {exc.strerror or exc}") from None
    return parse_tools(text, name)


def parse_tools(text: str, name: str = "the tools file") -> ToolsFile:
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ToolsFileError(f"{name} is not JSON ({exc}); it must be an array of tools as "
                             "OpenAI's 'tools' declares them") from None
    if isinstance(raw, dict) and isinstance(raw.get("tools"), list):
        raw = raw["tools"]  # a request body's {"tools": [...]} is taken as it is
    try:
        tools = declared_tools(raw)
    except ToolDeclarationError as exc:
        raise ToolsFileError(f"{name}: {exc}") from None
    commands = {}
    for i, (entry, tool) in enumerate(zip(raw, tools, strict=True)):
        command = entry.get(COMMAND_KEY)
        if command is None:
            continue
        if (not isinstance(command, list) or not command
                or not all(isinstance(part, str) and part for part in command)):
            raise ToolsFileError(f'{name}: tools[{i}].{COMMAND_KEY} must be a command as a list '
                                 'of non-empty strings, e.g. ["python3", "weather.py"]')
        commands[tool.name] = tuple(command)
    return ToolsFile(tools, commands, json.dumps(raw, ensure_ascii=False, separators=(",", ":")))


def command_line(command: tuple[str, ...], arguments: str) -> list[str]:
    """The exact argument vector a call runs: the tool's command, then the call's arguments."""
    return [*command, arguments]


MAX_RESULT_CHARS = 16_000  # a tool's reply goes into the prompt: bounded


def result_text(output: bytes, limit: int = MAX_RESULT_CHARS) -> str:
    """A command's output as the tool's reply: UTF-8 (bad bytes replaced), at most `limit`
    characters, with a note where it was cut."""
    text = output.decode("utf-8", errors="replace")
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[output truncated: {len(text) - limit} more characters]"


def pretty_arguments(arguments: str) -> str:
    """A call's arguments (JSON text of an object) indented for reading."""
    value: Any = json.loads(arguments)
    return json.dumps(value, indent=2, ensure_ascii=False)
