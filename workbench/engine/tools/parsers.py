"""Reading tool calls out of an answer, one pure function per family's way of writing them.

Each takes the answer text (special tokens spelt out, as the engine streams them) and returns a
`ParsedAnswer`: the text around the calls, and the calls. Text that opens a call but is not one
(cut by max_tokens, JSON that does not parse, a tool not declared) is never half returned as a
call: the whole answer stays text and `malformed` says why. The shapes are those llama.cpp's
server reads (common/chat.cpp), written from each family's documented output.
"""

from __future__ import annotations

import json
import re
from typing import Any

from workbench.engine.tools.calls import ParsedAnswer, ToolCall, arguments_text

_DECODER = json.JSONDecoder()


class _NotACall(ValueError):
    pass


def _json_at(text: str, pos: int) -> tuple[Any, int]:
    """The JSON value starting at `pos` (whitespace skipped) and the index after it."""
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    try:
        return _DECODER.raw_decode(text, pos)
    except json.JSONDecodeError as exc:
        raise _NotACall(f"the call's JSON does not parse ({exc.msg} at character {exc.pos})"
                        ) from None


def _call(name: Any, arguments: Any, call_id: Any = "") -> ToolCall:
    if not isinstance(name, str) or not name:
        raise _NotACall("the call names no tool")
    args = arguments_text({} if arguments is None else arguments)
    if args is None:
        raise _NotACall(f"the arguments of {name!r} are not a JSON object")
    return ToolCall(name=name, arguments=args, id=call_id if isinstance(call_id, str) else "")


def _object_call(value: Any, args_key: str = "arguments") -> ToolCall:
    """{"name": ..., "arguments": {...}} (or `args_key`), as most JSON formats write a call."""
    if not isinstance(value, dict):
        raise _NotACall("a call must be a JSON object")
    if isinstance(value.get("function"), dict):  # {"type": "function", "function": {...}}
        value = value["function"]
    args = value.get(args_key, value.get("arguments", value.get("parameters")))
    return _call(value.get("name"), args, value.get("id", ""))


def _done(content: str, calls: list[ToolCall]) -> ParsedAnswer:
    return ParsedAnswer(content=content.strip(), calls=tuple(calls))


def _guarded(text: str, read: Any) -> ParsedAnswer:
    try:
        result: ParsedAnswer = read(text)
        return result
    except _NotACall as exc:
        return ParsedAnswer(content=text, malformed=str(exc))


# ---- Hermes 2 Pro, Qwen 2.5 / 3: <tool_call>{"name": ..., "arguments": {...}}</tool_call> ----

HERMES_OPEN, HERMES_CLOSE = "<tool_call>", "</tool_call>"


def parse_hermes(text: str) -> ParsedAnswer:
    def read(text: str) -> ParsedAnswer:
        calls, content, pos = [], [], 0
        while (start := text.find(HERMES_OPEN, pos)) >= 0:
            content.append(text[pos:start])
            value, end = _json_at(text, start + len(HERMES_OPEN))
            calls.append(_object_call(value))
            close = text.find(HERMES_CLOSE, end)
            if close >= 0 and not text[end:close].strip():
                end = close + len(HERMES_CLOSE)
            pos = end
        content.append(text[pos:])
        return _done("".join(content), calls)
    return _guarded(text, read)


# ---- Llama 3.x: {"name": ..., "parameters": {...}}, optionally after <|python_tag|> ---------

PYTHON_TAG = "<|python_tag|>"
_LLAMA3_START = re.compile(r'\s*\{\s*("type"\s*:\s*"function"\s*,\s*)?"name"\s*:')


def parse_llama3(text: str) -> ParsedAnswer:
    def read(text: str) -> ParsedAnswer:
        body = text
        before = ""
        if (tag := text.find(PYTHON_TAG)) >= 0:
            before, body = text[:tag], text[tag + len(PYTHON_TAG):]
        elif not _LLAMA3_START.match(text):
            return ParsedAnswer(content=text)
        calls, pos = [], 0
        while True:
            value, pos = _json_at(body, pos)
            calls.append(_object_call(value, "parameters"))
            rest = body[pos:].lstrip()
            if not rest.startswith(";") and not rest.startswith("{"):  # ";" joins parallel ones
                break
            pos = len(body) - len(rest) + (1 if rest.startswith(";") else 0)
        return _done(before + body[pos:], calls)
    return _guarded(text, read)


# ---- Mistral: [TOOL_CALLS][{"name", "arguments", "id"}, ...]; v11: [TOOL_CALLS]name[ARGS]{} --

MISTRAL_OPEN, MISTRAL_ARGS = "[TOOL_CALLS]", "[ARGS]"
_MISTRAL_V11_NAME = re.compile(r"\s*([A-Za-z0-9_.-]+)(?:\[CALL_ID\]([A-Za-z0-9]+))?\[ARGS\]")


def parse_mistral(text: str) -> ParsedAnswer:
    def read(text: str) -> ParsedAnswer:
        start = text.find(MISTRAL_OPEN)
        if start < 0:
            return ParsedAnswer(content=text)
        content, calls, pos = text[:start], [], start
        while text.startswith(MISTRAL_OPEN, pos):
            pos += len(MISTRAL_OPEN)
            named = _MISTRAL_V11_NAME.match(text, pos)
            if named:
                args, pos = _json_at(text, named.end())
                calls.append(_call(named.group(1), args, named.group(2) or ""))
                continue
            value, pos = _json_at(text, pos)
            items = value if isinstance(value, list) else [value]
            calls.extend(_object_call(v) for v in items)
            pos = len(text) - len(text[pos:].lstrip())
        if not calls:
            raise _NotACall("[TOOL_CALLS] is followed by no call")
        return _done(content + text[pos:], calls)
    return _guarded(text, read)


# ---- gpt-oss (harmony): <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{}

_HARMONY_CALL = re.compile(
    r"(?:<\|start\|>assistant)?\s*(?:<\|channel\|>commentary\s+)?to=functions\.([\w.-]+)"
    r"(?:\s*<\|channel\|>commentary)?(?:\s*<\|constrain\|>)?\s*(?:json)?\s*<\|message\|>")
_HARMONY_END = ("<|call|>", "<|end|>")


def parse_harmony(text: str) -> ParsedAnswer:
    def read(text: str) -> ParsedAnswer:
        content, calls, pos = [], [], 0
        while (match := _HARMONY_CALL.search(text, pos)):
            content.append(text[pos:match.start()])
            args, end = _json_at(text, match.end())
            calls.append(_call(match.group(1), args))
            rest = text[end:].lstrip()
            for marker in _HARMONY_END:
                if rest.startswith(marker):
                    rest = rest[len(marker):]
            pos = len(text) - len(rest)
        content.append(text[pos:])
        return _done("".join(content), calls)
    return _guarded(text, read)


# ---- DeepSeek R1 / V3: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
# ```json {...} ```<｜tool▁call▁end｜>...; V3.1: <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}

DEEPSEEK_OPEN = "<｜tool▁calls▁begin｜>"
DEEPSEEK_CLOSE = "<｜tool▁calls▁end｜>"
_DS_CALL = re.compile(r"\s*<｜tool▁call▁begin｜>\s*(?:function\s*<｜tool▁sep｜>\s*([^\n`<]+?)\s*"
                      r"```(?:json)?|([^<\n]+?)\s*<｜tool▁sep｜>)")
_DS_CALL_END = "<｜tool▁call▁end｜>"


def parse_deepseek(text: str) -> ParsedAnswer:
    def read(text: str) -> ParsedAnswer:
        start = text.find(DEEPSEEK_OPEN)
        if start < 0:
            return ParsedAnswer(content=text)
        calls, pos = [], start + len(DEEPSEEK_OPEN)
        while (match := _DS_CALL.match(text, pos)):
            args, pos = _json_at(text, match.end())
            calls.append(_call((match.group(1) or match.group(2)).strip(), args))
            rest = text[pos:].lstrip()
            if rest.startswith("```"):
                rest = rest[3:].lstrip()
            if rest.startswith(_DS_CALL_END):
                rest = rest[len(_DS_CALL_END):]
            pos = len(text) - len(rest)
        if not calls:
            raise _NotACall("the tool-calls block holds no call")
        rest = text[pos:].lstrip()
        if rest.startswith(DEEPSEEK_CLOSE):
            rest = rest[len(DEEPSEEK_CLOSE):]
        return _done(text[:start] + rest, calls)
    return _guarded(text, read)


# ---- Functionary v3.2: >>>all\ntext>>>NAME\n{...}
# ---- Functionary v3.1 (Llama 3.1): <function=NAME>{...}</function>

_FUNCTIONARY_32 = re.compile(r"(?:^|>>>)([A-Za-z0-9_.-]+)\n")
FUNCTION_OPEN, FUNCTION_CLOSE = "<function=", "</function>"


def parse_functionary_v32(text: str) -> ParsedAnswer:
    def read(text: str) -> ParsedAnswer:
        content, calls, pos = [], [], 0
        while (match := _FUNCTIONARY_32.match(text, pos)) or text.startswith(">>>", pos):
            if match is None:
                raise _NotACall("'>>>' is followed by no tool name")
            name, pos = match.group(1), match.end()
            if name == "all":  # plain text up to the next call
                nxt = text.find(">>>", pos)
                content.append(text[pos:] if nxt < 0 else text[pos:nxt])
                pos = len(text) if nxt < 0 else nxt
                continue
            args, pos = _json_at(text, pos)
            calls.append(_call(name, args))
        if pos == 0:
            return ParsedAnswer(content=text)
        content.append(text[pos:])
        return _done("".join(content), calls)
    return _guarded(text, read)


def parse_functionary_v31(text: str) -> ParsedAnswer:
    def read(text: str) -> ParsedAnswer:
        content, calls, pos = [], [], 0
        while (start := text.find(FUNCTION_OPEN, pos)) >= 0:
            content.append(text[pos:start])
            name_end = text.find(">", start)
            if name_end < 0:
                raise _NotACall("'<function=' is not closed with '>'")
            args, end = _json_at(text, name_end + 1)
            calls.append(_call(text[start + len(FUNCTION_OPEN):name_end], args))
            close = text.find(FUNCTION_CLOSE, end)
            pos = close + len(FUNCTION_CLOSE) if close >= 0 and not text[end:close].strip() \
                else end
        content.append(text[pos:])
        return _done("".join(content), calls)
    return _guarded(text, read)


# ---- Firefunction v2: functools[{"name": ..., "arguments": {...}}, ...] ------------------------

FUNCTOOLS = "functools"


def parse_firefunction(text: str) -> ParsedAnswer:
    def read(text: str) -> ParsedAnswer:
        start = text.find(FUNCTOOLS + "[")
        if start < 0:
            return ParsedAnswer(content=text)
        value, end = _json_at(text, start + len(FUNCTOOLS))
        if not isinstance(value, list) or not value:
            raise _NotACall("functools is followed by no list of calls")
        return _done(text[:start] + text[end:], [_object_call(v) for v in value])
    return _guarded(text, read)


# ---- generic (any template): {"tool_calls": [{"name", "arguments"}]} or {"response": "..."} ---


def parse_generic(text: str) -> ParsedAnswer:
    def read(text: str) -> ParsedAnswer:
        if not text.lstrip().startswith("{"):
            return ParsedAnswer(content=text)
        value, end = _json_at(text, 0)
        if text[end:].strip() or not isinstance(value, dict):
            raise _NotACall("the answer is not one JSON object")
        if "response" in value and isinstance(value["response"], str):
            return ParsedAnswer(content=value["response"])
        if isinstance(value.get("tool_call"), dict):
            return _done("", [_object_call(value["tool_call"])])
        if isinstance(value.get("tool_calls"), list) and value["tool_calls"]:
            return _done("", [_object_call(v) for v in value["tool_calls"]])
        raise _NotACall("the answer is neither {\"tool_calls\": [...]} nor {\"response\": ...}")
    return _guarded(text, read)
