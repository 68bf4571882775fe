"""Tool calling as values: the tools a turn may call, how it may call them, the calls it made."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

AUTO, NONE, REQUIRED = "auto", "none", "required"


@dataclass(frozen=True, slots=True)
class Tool:
    """One function a turn may call, as OpenAI declares it (`{"type": "function", "function":
    {name, description, parameters}}`); `declared` is that object, passed to the template."""

    name: str
    parameters_json: str  # the JSON schema of its arguments (JSON text: the value stays frozen)
    declared_json: str

    @property
    def parameters(self) -> dict[str, Any]:
        value = json.loads(self.parameters_json)
        return value if isinstance(value, dict) else {}

    @property
    def declared(self) -> dict[str, Any]:
        return dict(json.loads(self.declared_json))


@dataclass(frozen=True, slots=True)
class ToolCalling:
    """The tools of one turn and how it may use them (OpenAI's `tool_choice`: "auto" the model
    decides, "none" it answers in text, "required" it calls at least one, or `function` names the
    one it must call; `parallel`: more than one call in a turn)."""

    tools: tuple[Tool, ...]
    choice: str = AUTO  # AUTO, NONE or REQUIRED (a named function is REQUIRED + function)
    function: str = ""  # the one tool it must call ("" any)
    parallel: bool = True

    @property
    def calls_allowed(self) -> bool:
        return bool(self.tools) and self.choice != NONE

    @property
    def forced(self) -> bool:
        """A call from the first token (required or named), not lazily where the model opens one."""
        return self.choice == REQUIRED

    @property
    def callable(self) -> tuple[Tool, ...]:
        """The tools a call may name."""
        if self.function:
            return tuple(t for t in self.tools if t.name == self.function)
        return self.tools

    def names(self) -> set[str]:
        return {t.name for t in self.callable}


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call the model made: its tool and its arguments (JSON text of an object), and the id
    the model wrote for it ("" when its format has none: the server gives one)."""

    name: str
    arguments: str
    id: str = ""


@dataclass(frozen=True, slots=True)
class ParsedAnswer:
    """An answer read for tool calls: the text around them and the calls. `malformed` says why
    text that opened a call is not one (it stays in `content`, never half a call)."""

    content: str
    calls: tuple[ToolCall, ...] = ()
    malformed: str = ""


def arguments_text(value: Any) -> str | None:
    """A call's arguments as compact JSON text of an object; None when they are not one (a
    string of JSON is read first, as some formats write it)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    if not isinstance(value, dict):
        return None
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
