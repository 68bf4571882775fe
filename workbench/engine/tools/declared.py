"""Tools as OpenAI declares them (`{"type": "function", "function": {name, description,
parameters}}`), read from untrusted JSON: the API's `tools` (server/tools.py) and a window
conversation's tools file (ui/chat/tools_file.py) take each one through `declared_tool`, so both
refuse the same things with the same words. Each tool's `parameters` must be a schema the grammar
can enforce (the same check as a response format's), so a call's arguments always validate."""

from __future__ import annotations

import json
import re
from typing import Any

from workbench.backend.grammar import SchemaError, schema_to_gbnf
from workbench.engine.tools.calls import Tool

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # OpenAI's rule for function names
MAX_TOOLS = 128


class ToolDeclarationError(ValueError):
    """A tool declaration that cannot be used: what is wrong (`str`), and where (`param`:
    "tools[0].function.name")."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


def declared_tool(raw: Any, where: str) -> Tool:
    """One declared tool; ToolDeclarationError names the field and what is wrong with it."""
    if not isinstance(raw, dict) or raw.get("type") != "function" or not isinstance(
            raw.get("function"), dict):
        raise ToolDeclarationError(f'{where} must be {{"type": "function", "function": '
                                   '{...}}', where)
    function = raw["function"]
    name = function.get("name")
    if not isinstance(name, str) or not TOOL_NAME.match(name):
        raise ToolDeclarationError(f"{where}.function.name must be 1-64 letters, digits, '_' "
                                   "or '-'", f"{where}.function.name")
    description = function.get("description")
    if description is not None and not isinstance(description, str):
        raise ToolDeclarationError(f"{where}.function.description must be a string",
                                   f"{where}.function.description")
    parameters = function.get("parameters", {"type": "object", "properties": {}})
    param = f"{where}.function.parameters"
    if not isinstance(parameters, dict):
        raise ToolDeclarationError(f"{param} must be a JSON schema object", param)
    try:
        schema_to_gbnf(parameters)  # the call's arguments will be held to it
    except SchemaError as exc:
        raise ToolDeclarationError(f"{param}: {exc}", param) from None
    declared = {"type": "function", "function": {**function, "parameters": parameters}}
    return Tool(name=name, parameters_json=json.dumps(parameters),
                declared_json=json.dumps(declared, ensure_ascii=False))


def declared_tools(raw: Any, where: str = "tools") -> tuple[Tool, ...]:
    """A list of declared tools, at most MAX_TOOLS, with distinct names."""
    if not isinstance(raw, list) or len(raw) > MAX_TOOLS:
        raise ToolDeclarationError(f"'{where}' must be an array of at most {MAX_TOOLS} tools",
                                   where)
    tools = tuple(declared_tool(t, f"{where}[{i}]") for i, t in enumerate(raw))
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise ToolDeclarationError("two tools have the same name", where)
    return tools
