"""The grammar a turn's tool calls are held to: each family's wrapper around a call, and each
tool's own arguments from its JSON schema (`backend.grammar.schema_to_gbnf`), so the arguments
always parse and validate. Lazy (auto): sampling is free until the model writes the family's
opening text (a trigger pattern, llama.cpp's lazy grammar), then held to the grammar; forced
(required or a named function): the grammar holds from the first token."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from workbench.backend.grammar import schema_to_gbnf
from workbench.engine.tools.calls import Tool, ToolCalling

WS = "ws ::= [ \\t\\n]{0,3}"
_RULE = re.compile(r"^([A-Za-z0-9-]+) ::=", re.M)
# GBNF's literals and character classes, left alone when rule names are renamed.
_LITERAL = re.compile(r'"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]')
_NAME = re.compile(r"(?<![\w-])[A-Za-z0-9-]+(?![\w-])")


@dataclass(frozen=True, slots=True)
class ToolGrammar:
    """GBNF (rule `root`) and, when lazy, the patterns that start it (empty: from the start)."""

    gbnf: str
    triggers: tuple[str, ...] = ()


def literal(text: str) -> str:
    """`text` as a GBNF string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def json_literal(text: str) -> str:
    """`text` as a JSON string, as a GBNF literal."""
    return literal(json.dumps(text, ensure_ascii=False))


def prefixed(gbnf: str, prefix: str) -> str:
    """The grammar with every rule renamed `prefix-NAME` (literals untouched), so several
    schemas' grammars live in one."""
    names = set(_RULE.findall(gbnf))

    def rename(part: str) -> str:
        return _NAME.sub(lambda m: f"{prefix}-{m.group(0)}" if m.group(0) in names
                         else m.group(0), part)

    out, pos = [], 0
    for match in _LITERAL.finditer(gbnf):
        out.append(rename(gbnf[pos:match.start()]))
        out.append(match.group(0))
        pos = match.end()
    out.append(rename(gbnf[pos:]))
    return "".join(out)


def arguments_rules(tools: tuple[Tool, ...]) -> tuple[list[str], list[str]]:
    """Each tool's arguments rule name (`args-I-root`) and all their rules (SchemaError when a
    schema cannot be enforced)."""
    names, rules = [], []
    for i, tool in enumerate(tools):
        rules.append(prefixed(schema_to_gbnf(tool.parameters or {"type": "object"}),
                              f"args-{i}"))
        names.append(f"args-{i}-root")
    return names, rules


def json_call(name: str, args_rule: str, args_key: str = "arguments", extra: str = "") -> str:
    """A call written as a JSON object {"name": NAME, "<args_key>": {...}} (`extra`: more
    members after the arguments, already GBNF)."""
    return (f'"{{" ws "\\"name\\"" ws ":" ws {json_literal(name)} ws "," ws '
            f'"\\"{args_key}\\"" ws ":" ws {args_rule} ws {extra}"}}"')


Wrap = Callable[[ToolCalling, list[str]], list[str]]


def build(calling: ToolCalling, wrap: Wrap, triggers: tuple[str, ...]) -> ToolGrammar:
    """The grammar of `calling` in a family's `wrap` (its root rule and helpers, given the
    arguments rule of each callable tool); lazy with `triggers` unless the call is forced."""
    names, rules = arguments_rules(calling.callable)
    gbnf = "\n".join([*wrap(calling, names), WS, *rules])
    return ToolGrammar(gbnf, () if calling.forced else triggers)


def repeat(calling: ToolCalling, item: str, sep: str = "ws") -> str:
    """`item` once, or one or more times when parallel calls are allowed."""
    return f"{item} ( {sep} {item} )*" if calling.parallel else item


def alternatives(calling: ToolCalling, names: list[str], one: Callable[[str, str], str]) -> str:
    return " | ".join(f"( {one(t.name, a)} )" for t, a in zip(calling.callable, names,
                                                              strict=True))


def trigger_after(*openers: str) -> tuple[str, ...]:
    """Lazy patterns: the grammar starts where one of `openers` appears (fed from it on)."""
    return tuple(r"[\s\S]*?(" + regex_escape(o) + r")[\s\S]*" for o in openers)


def regex_escape(text: str) -> str:
    """`text` as an ECMAScript regex literal (llama.cpp's std::regex): only the syntax
    characters escaped (Python's re.escape escapes more, which std::regex may refuse)."""
    return re.sub(r"([\\^$.|?*+()\[\]{}])", r"\\\1", text)
