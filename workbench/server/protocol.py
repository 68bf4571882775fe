"""A request body in, a typed `EngineCall` out, or an OpenAI-style 400 that names the field.

Known fields are checked for type and range (structured output and log-probabilities in
structured.py, tools in tools.py); a field this server cannot honour (n > 1) is refused rather than
silently ignored, since the client would otherwise trust an answer made without it. Unknown
fields are ignored, as OpenAI's own server and llama.cpp's do: clients send extras (and newer
fields) freely.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from workbench.engine.constrain import Decoding
from workbench.engine.tools.calls import ToolCalling
from workbench.server.errors import ApiError, bad_request
from workbench.server.json_text import unencodable_field
from workbench.server.structured import parse_decoding
from workbench.server.tools import parse_tools, past_calls

MAX_STOP_STRINGS = 16
# Request fields that map onto the session's per-request settings (workbench/config.py).
SAMPLING_FIELDS = {
    "temperature": "temp", "top_p": "top_p", "min_p": "min_p", "seed": "seed",
    "presence_penalty": "presence_penalty", "frequency_penalty": "frequency_penalty",
}
ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant",
         "tool": "tool"}


@dataclass(frozen=True, slots=True)
class EngineCall:
    """What one request asks of the engine."""

    kind: str  # "chat" or "completion"
    messages: tuple[dict[str, str], ...] = ()  # chat: the conversation, the user's last
    prompt: str = ""  # completion: the raw text
    settings: dict[str, Any] = field(default_factory=dict)  # Config field -> value
    max_tokens: int | None = None  # None: the session's tokens-to-generate
    stop: tuple[str, ...] = ()
    think: bool | None = None  # None: the session's thinking switch
    stream: bool = False
    include_usage: bool = False
    client: str = ""  # the `user` field, when the client names itself
    # The grammar and log-probabilities the turn runs with (server/structured.py).
    decoding: Decoding = field(default_factory=Decoding)
    tools: ToolCalling | None = None  # the tools it may call (server/tools.py)

    @property
    def history(self) -> list[dict[str, str]]:
        return [dict(m) for m in self.messages[:-1]]

    @property
    def text(self) -> str:
        return self.messages[-1]["content"] if self.kind == "chat" else self.prompt

    @property
    def last_message(self) -> dict[str, str] | None:
        """The message the turn answers when it is a tool's reply (None: the user's text)."""
        if self.kind == "chat" and self.messages[-1]["role"] == "tool":
            return dict(self.messages[-1])
        return None

    @property
    def calls_allowed(self) -> bool:
        return self.tools is not None and self.tools.calls_allowed


def parse_json(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ApiError(400, f"the request body is not valid JSON: {exc}",
                       code="invalid_json") from None
    if not isinstance(data, dict):
        raise bad_request("the request body must be a JSON object")
    where = unencodable_field(data)
    if where is not None:  # a lone surrogate (\ud800): valid JSON, but no text can hold it
        raise bad_request(f"{where or 'the request'} holds text that cannot be encoded as UTF-8 "
                          "(a lone UTF-16 surrogate such as \\ud800): send valid Unicode",
                          where or None, code="invalid_text")
    return data


def parse_chat(data: dict[str, Any]) -> EngineCall:
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request("'messages' must be a non-empty array of messages", "messages")
    parsed = tuple(_message(m, i) for i, m in enumerate(messages))
    if parsed[-1]["role"] not in ("user", "tool"):
        raise bad_request("the last message must be the user's (role 'user') or a tool's "
                          "reply (role 'tool'): this server answers it",
                          f"messages[{len(parsed) - 1}].role")
    _refuse_unsupported(data)
    tools = parse_tools(data)
    decoding = parse_decoding(data, "chat")
    kwargs = _optional(data, "chat_template_kwargs", dict) or {}
    think = kwargs.get("enable_thinking")
    if think is not None and not isinstance(think, bool):
        raise bad_request("chat_template_kwargs.enable_thinking must be true or false",
                          "chat_template_kwargs")
    max_tokens = _max_tokens(data, "max_completion_tokens") or _max_tokens(data, "max_tokens")
    return EngineCall(kind="chat", messages=parsed, think=think, max_tokens=max_tokens,
                      decoding=decoding, tools=tools, **_common(data))


def parse_completion(data: dict[str, Any]) -> EngineCall:
    prompt = data.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str) or not prompt:
        raise bad_request("'prompt' must be a non-empty string (one prompt per request)",
                          "prompt")
    _refuse_unsupported(data)
    if data.get("echo") not in (None, False):
        raise bad_request("'echo' is not supported", "echo")
    if data.get("suffix") not in (None, ""):
        raise bad_request("'suffix' (insertion) is not supported", "suffix")
    return EngineCall(kind="completion", prompt=prompt, max_tokens=_max_tokens(data, "max_tokens"),
                      decoding=parse_decoding(data, "completion"), **_common(data))


def _common(data: dict[str, Any]) -> dict[str, Any]:
    stream = _optional(data, "stream", bool) or False
    options = _optional(data, "stream_options", dict) or {}
    include_usage = options.get("include_usage", False)
    if not isinstance(include_usage, bool):
        raise bad_request("stream_options.include_usage must be true or false", "stream_options")
    settings: dict[str, Any] = {}
    for name, setting in SAMPLING_FIELDS.items():
        value = data.get(name)
        if value is None:
            continue
        if name == "seed":
            if not _is_int(value):
                raise bad_request("'seed' must be an integer", "seed")
            settings[setting] = value
        else:
            settings[setting] = _number(value, name)
    return {"settings": settings, "stop": _stop(data.get("stop")), "stream": stream,
            "include_usage": include_usage, "client": _optional(data, "user", str) or ""}


def _refuse_unsupported(data: dict[str, Any]) -> None:
    n = data.get("n")
    if n is not None and (not _is_int(n) or n != 1):
        raise bad_request("only n=1 is supported (one answer per request)", "n")
    if data.get("best_of") not in (None, 1):
        raise bad_request("only best_of=1 is supported", "best_of")
    for name in ("model", "user"):
        _optional(data, name, str)


def _message(raw: Any, i: int) -> dict[str, str]:
    where = f"messages[{i}]"
    if not isinstance(raw, dict):
        raise bad_request(f"{where} must be an object with 'role' and 'content'", where)
    role = raw.get("role")
    if role not in ROLES:
        raise bad_request(f"{where}.role must be one of {', '.join(ROLES)} (got {role!r})",
                          f"{where}.role")
    content = raw.get("content")
    if content is None and role in ("assistant", "tool"):
        content = ""
    if isinstance(content, list):
        content = "".join(_text_part(part, f"{where}.content[{j}]")
                          for j, part in enumerate(content))
    if not isinstance(content, str):
        raise bad_request(f"{where}.content must be a string or an array of text parts",
                          f"{where}.content")
    message = {"role": ROLES[role], "content": content}
    if role == "assistant" and raw.get("tool_calls") is not None:
        message["tool_calls"] = past_calls(raw["tool_calls"], f"{where}.tool_calls")
    if role == "tool":
        call_id = raw.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise bad_request(f"{where}.tool_call_id must name the call this replies to",
                              f"{where}.tool_call_id")
        message["tool_call_id"] = call_id
        if isinstance(raw.get("name"), str):
            message["name"] = raw["name"]
    return message


def _text_part(part: Any, where: str) -> str:
    if not isinstance(part, dict) or part.get("type") != "text":
        kind = part.get("type") if isinstance(part, dict) else type(part).__name__
        raise bad_request(f"{where}: only text parts are supported (got {kind!r})", where)
    text = part.get("text")
    if not isinstance(text, str):
        raise bad_request(f"{where}.text must be a string", where)
    return text


def _stop(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if (not isinstance(items, list) or not all(isinstance(s, str) and s for s in items)
            or len(items) > MAX_STOP_STRINGS):
        raise bad_request(f"'stop' must be a non-empty string or an array of at most "
                          f"{MAX_STOP_STRINGS} non-empty strings", "stop")
    return tuple(items)


def _max_tokens(data: dict[str, Any], name: str) -> int | None:
    value = data.get(name)
    if value is None:
        return None
    if not _is_int(value) or value < 1:
        raise bad_request(f"'{name}' must be a positive integer", name)
    return value


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise bad_request(f"'{name}' must be a number", name)
    return float(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _optional(data: dict[str, Any], name: str, kind: type) -> Any:
    value = data.get(name)
    if value is not None and not isinstance(value, kind):
        names = {bool: "true or false", str: "a string", dict: "an object"}
        raise bad_request(f"'{name}' must be {names.get(kind, kind.__name__)}", name)
    return value
