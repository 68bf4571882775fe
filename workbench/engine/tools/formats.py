"""Tool-call formats: how each model family writes a call, detected from its chat template.

A format is data: its parser (parsers.py), the grammar wrapper around a call (grammar.py), the
lazy triggers where a call opens, and `openers`, the literal texts after which a streamed answer
is held back (it may be a call). A template that names none of the families' markers gets the
generic format: the model is told the tools and answers in JSON, held to a grammar from the
first token (llama.cpp's generic handler does the same).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from workbench.engine.tools import parsers
from workbench.engine.tools.calls import ParsedAnswer, ToolCalling
from workbench.engine.tools.grammar import (
    ToolGrammar,
    alternatives,
    build,
    json_call,
    literal,
    regex_escape,
    repeat,
    trigger_after,
)


@dataclass(frozen=True)
class ToolFormat:
    name: str
    parse: Callable[[str], ParsedAnswer]
    grammar: Callable[[ToolCalling], ToolGrammar]
    # Literal texts that open a call (a stream holds back what follows one); "" : the answer as a
    # whole may be one (it is held back from its start).
    openers: tuple[str, ...]
    generic: bool = False  # the template cannot show tools: they are described in the prompt
    in_reasoning: bool = False  # calls may be written where the reasoning parser puts them


def calls_grammar(c: ToolCalling, one: Callable[[str, str], str], root: str,
                  triggers: tuple[str, ...], *rules: str) -> ToolGrammar:
    """A family's grammar: `root` (GBNF naming `call`), `call` one tool's call as the family
    writes it (`one(name, arguments_rule)`, an alternative per callable tool), more `rules`."""
    def wrap(c: ToolCalling, names: list[str]) -> list[str]:
        return [f"root ::= {root}", f"call ::= {alternatives(c, names, one)}", *rules]
    return build(c, wrap, triggers)


def _hermes(c: ToolCalling) -> ToolGrammar:
    return calls_grammar(c, lambda n, a: f'"<tool_call>" ws {json_call(n, a)} ws "</tool_call>"',
                         repeat(c, "call"), trigger_after(parsers.HERMES_OPEN))


def _llama3(c: ToolCalling) -> ToolGrammar:
    # An answer that starts with "{" is a call (Llama 3's convention for JSON tool calls).
    return calls_grammar(c, lambda n, a: json_call(n, a, "parameters"),
                         f"{literal(parsers.PYTHON_TAG)}? call",
                         (*trigger_after(parsers.PYTHON_TAG), r"\s*(\{)[\s\S]*"))


def _mistral(c: ToolCalling) -> ToolGrammar:
    call_id = '"," ws "\\"id\\"" ws ":" ws call-id ws '
    return calls_grammar(c, lambda n, a: json_call(n, a, extra=call_id),
                         f'"[TOOL_CALLS]" ws "[" ws {repeat(c, "call", LIST_SEP)} ws "]"',
                         trigger_after(parsers.MISTRAL_OPEN),
                         'call-id ::= "\\"" [a-zA-Z0-9]{9} "\\""')


def _mistral_v11(c: ToolCalling) -> ToolGrammar:
    return calls_grammar(c, lambda n, a: f'"[TOOL_CALLS]" {literal(n)} "[ARGS]" {a}',
                         repeat(c, "call", ""), trigger_after(parsers.MISTRAL_OPEN))


HARMONY_OPEN = "<|channel|>commentary to="


def _harmony(c: ToolCalling) -> ToolGrammar:
    return calls_grammar(c, lambda n, a: f'{literal(n)} " <|constrain|>json" "<|message|>" {a}',
                         f'{literal(HARMONY_OPEN)} "functions." call', trigger_after(HARMONY_OPEN))


def _deepseek(c: ToolCalling) -> ToolGrammar:
    return calls_grammar(c, lambda n, a: (
        f'"<｜tool▁call▁begin｜>function<｜tool▁sep｜>" {literal(n)} "\\n```json\\n" {a} '
        '"\\n```<｜tool▁call▁end｜>"'), DEEPSEEK_ROOT.format(repeat(c, "call")),
        trigger_after(parsers.DEEPSEEK_OPEN))


def _deepseek_v31(c: ToolCalling) -> ToolGrammar:
    return calls_grammar(c, lambda n, a: (
        f'"<｜tool▁call▁begin｜>" {literal(n)} "<｜tool▁sep｜>" {a} "<｜tool▁call▁end｜>"'),
        DEEPSEEK_ROOT.format(repeat(c, "call")), trigger_after(parsers.DEEPSEEK_OPEN))


DEEPSEEK_ROOT = '"<｜tool▁calls▁begin｜>" {} "<｜tool▁calls▁end｜>"'


def _functionary_v32(c: ToolCalling) -> ToolGrammar:
    # The generation prompt ends with ">>>": the first call starts with its name.
    starts = tuple(f"({regex_escape(t.name)}\\n)[\\s\\S]*" for t in c.callable)
    return calls_grammar(c, lambda n, a: f"{literal(n + chr(10))} {a}",
                         f'">>>"? {repeat(c, "call", chr(34) + ">>>" + chr(34))}',
                         (*trigger_after(">>>"), *starts))


def _functionary_v31(c: ToolCalling) -> ToolGrammar:
    return calls_grammar(c, lambda n, a: f'"<function=" {literal(n)} ">" {a} "</function>"',
                         repeat(c, "call"), trigger_after(parsers.FUNCTION_OPEN))


def _firefunction(c: ToolCalling) -> ToolGrammar:
    return calls_grammar(c, json_call, f'"functools[" ws {repeat(c, "call", LIST_SEP)} ws "]"',
                         trigger_after(parsers.FUNCTOOLS + "["))


LIST_SEP = '"," ws'
GENERIC_STRING = ('gen-string ::= "\\"" ( [^"\\\\\\x7F\\x00-\\x1F] | "\\\\" ( ["\\\\/bfnrt] | '
                  '"u" [0-9a-fA-F]{4} ) )* "\\""')


def _generic(c: ToolCalling) -> ToolGrammar:
    # From the first token, auto or not: the whole answer is one JSON object.
    calls = (f'calls ::= "{{" ws "\\"tool_calls\\"" ws ":" ws "[" ws '
             f'{repeat(c, "call", LIST_SEP)} ws "]" ws "}}"')
    if c.forced:
        return calls_grammar(c, json_call, "calls", (), calls)
    response = 'response ::= "{" ws "\\"response\\"" ws ":" ws gen-string ws "}"'
    return calls_grammar(c, json_call, "calls | response", (), calls, response, GENERIC_STRING)


HERMES = ToolFormat("hermes", parsers.parse_hermes, _hermes, (parsers.HERMES_OPEN,))
LLAMA3 = ToolFormat("llama3", parsers.parse_llama3, _llama3, (parsers.PYTHON_TAG, ""))
MISTRAL = ToolFormat("mistral", parsers.parse_mistral, _mistral, (parsers.MISTRAL_OPEN,))
MISTRAL_V11 = ToolFormat("mistral-v11", parsers.parse_mistral, _mistral_v11,
                         (parsers.MISTRAL_OPEN,))
HARMONY = ToolFormat("gpt-oss", parsers.parse_harmony, _harmony, (HARMONY_OPEN, " to=functions."),
                     in_reasoning=True)
DEEPSEEK = ToolFormat("deepseek", parsers.parse_deepseek, _deepseek, (parsers.DEEPSEEK_OPEN,))
DEEPSEEK_V31 = ToolFormat("deepseek-v3.1", parsers.parse_deepseek, _deepseek_v31,
                          (parsers.DEEPSEEK_OPEN,))
FUNCTIONARY_V32 = ToolFormat("functionary-v3.2", parsers.parse_functionary_v32,
                             _functionary_v32, ("",))
FUNCTIONARY_V31 = ToolFormat("functionary-v3.1", parsers.parse_functionary_v31,
                             _functionary_v31, (parsers.FUNCTION_OPEN,))
FIREFUNCTION = ToolFormat("firefunction-v2", parsers.parse_firefunction, _firefunction,
                          (parsers.FUNCTOOLS + "[",))
GENERIC = ToolFormat("generic", parsers.parse_generic, _generic, ("",), generic=True)

ALL_FORMATS = (HERMES, LLAMA3, MISTRAL, MISTRAL_V11, HARMONY, DEEPSEEK, DEEPSEEK_V31,
               FUNCTIONARY_V32, FUNCTIONARY_V31, FIREFUNCTION, GENERIC)


def detect_tool_format(source: str | None) -> ToolFormat:
    """The format a model using this template source writes calls in; GENERIC when the
    template names no family's markers (or there is none). Most specific first."""
    src = source or ""
    if "<|channel|>" in src:
        return HARMONY
    if parsers.DEEPSEEK_OPEN in src:
        return DEEPSEEK if "```json" in src else DEEPSEEK_V31
    if parsers.MISTRAL_OPEN in src:
        return MISTRAL_V11 if "[ARGS]" in src else MISTRAL
    if "functools[" in src:
        return FIREFUNCTION
    if ">>>all" in src:
        return FUNCTIONARY_V32
    if parsers.FUNCTION_OPEN in src and "<|start_header_id|>" in src:
        return FUNCTIONARY_V31
    if parsers.HERMES_OPEN in src:
        return HERMES
    if "<|start_header_id|>" in src and ("ipython" in src or parsers.PYTHON_TAG in src):
        return LLAMA3
    return GENERIC
