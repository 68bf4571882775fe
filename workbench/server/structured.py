"""Structured output and log-probabilities: the request fields in, OpenAI's shapes out.

In: `response_format` (`text`, `json_object`, `json_schema` with its `schema` and `strict`),
`grammar` (GBNF, as llama.cpp's server takes it), `logprobs` / `top_logprobs` (chat: a switch
and 0-20 alternatives; completions: the legacy 0-5 alternatives) become the turn's `Decoding`.
A schema feature the grammar cannot enforce is a 400 that names it, before the request queues.
Out: the `logprobs` object of a chat choice (`content`: token, logprob, bytes, top_logprobs)
or of a completion choice (tokens, token_logprobs, top_logprobs, text_offset), whole or per
streamed chunk.
"""

from __future__ import annotations

from typing import Any

from workbench.backend.grammar import SchemaError, schema_to_gbnf
from workbench.engine.answer_format import JSON_OBJECT
from workbench.engine.constrain import NO_LOGPROBS, Decoding
from workbench.engine.token_choice import TokenChoice, token_text
from workbench.server.errors import bad_request

MAX_TOP_LOGPROBS_CHAT = 20  # OpenAI's limits
MAX_LOGPROBS_COMPLETION = 5
MAX_GRAMMAR_CHARS = 1 << 18


def parse_decoding(data: dict[str, Any], kind: str) -> Decoding:
    """The turn's Decoding from a chat or completion body (ApiError 400 on a bad field)."""
    grammar = _grammar(data)
    if grammar and data.get("response_format") not in (None, {"type": "text"}):
        raise bad_request("send either 'grammar' or 'response_format', not both",
                          "response_format")
    if not grammar:
        grammar = _response_format(data.get("response_format"))
    logprobs = _chat_logprobs(data) if kind == "chat" else _completion_logprobs(data)
    return Decoding(grammar=grammar, logprobs=logprobs)


def _grammar(data: dict[str, Any]) -> str:
    grammar = data.get("grammar")
    if grammar is None or grammar == "":
        return ""
    if not isinstance(grammar, str):
        raise bad_request("'grammar' must be a string (GBNF, as llama.cpp's grammars)", "grammar")
    if len(grammar) > MAX_GRAMMAR_CHARS:
        raise bad_request(f"'grammar' is longer than {MAX_GRAMMAR_CHARS} characters", "grammar")
    return grammar


def _response_format(value: Any) -> str:
    """The GBNF a response_format asks for ("" for plain text)."""
    if value is None:
        return ""
    if not isinstance(value, dict):
        raise bad_request("'response_format' must be an object with a 'type'", "response_format")
    kind = value.get("type")
    if kind == "text":
        return ""
    if kind == "json_object":
        # llama.cpp's server takes a schema here too; without one, any JSON object.
        schema = value.get("schema", JSON_OBJECT)
        return _compile(schema, "response_format.schema")
    if kind == "json_schema":
        spec = value.get("json_schema")
        if not isinstance(spec, dict) or "schema" not in spec:
            raise bad_request("response_format.json_schema must be an object with a 'schema' "
                              "(and a 'name')", "response_format.json_schema")
        strict = spec.get("strict")
        if strict is not None and not isinstance(strict, bool):
            raise bad_request("response_format.json_schema.strict must be true or false",
                              "response_format.json_schema.strict")
        # strict or not, the answer is held to the schema: the grammar allows nothing else.
        return _compile(spec["schema"], "response_format.json_schema.schema")
    raise bad_request("response_format.type must be 'text', 'json_object' or 'json_schema' "
                      f"(got {kind!r})", "response_format.type")


def _compile(schema: Any, param: str) -> str:
    try:
        return schema_to_gbnf(schema)
    except SchemaError as exc:
        raise bad_request(f"{param}: {exc}", param) from None


def _chat_logprobs(data: dict[str, Any]) -> int:
    on = data.get("logprobs")
    if on is not None and not isinstance(on, bool):
        raise bad_request("'logprobs' must be true or false", "logprobs")
    top = data.get("top_logprobs")
    if top is not None:
        if not _is_int(top) or not 0 <= top <= MAX_TOP_LOGPROBS_CHAT:
            raise bad_request(f"'top_logprobs' must be an integer from 0 to "
                              f"{MAX_TOP_LOGPROBS_CHAT}", "top_logprobs")
        if not on:
            raise bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs")
    return (top or 0) if on else NO_LOGPROBS


def _completion_logprobs(data: dict[str, Any]) -> int:
    value = data.get("logprobs")
    if value is None:
        return NO_LOGPROBS
    if not _is_int(value) or not 0 <= value <= MAX_LOGPROBS_COMPLETION:
        raise bad_request(f"'logprobs' must be an integer from 0 to {MAX_LOGPROBS_COMPLETION}",
                          "logprobs")
    return int(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# ---- out ------------------------------------------------------------------------------------


def chat_logprobs(choices: list[TokenChoice]) -> dict[str, Any]:
    """A chat choice's (or chunk's) `logprobs` object."""
    return {"content": [_chat_entry(c) for c in choices], "refusal": None}


def _chat_entry(choice: TokenChoice) -> dict[str, Any]:
    return {
        "token": token_text(choice.piece), "logprob": choice.logprob,
        "bytes": list(choice.piece),
        "top_logprobs": [{"token": token_text(piece), "logprob": lp, "bytes": list(piece)}
                         for _, piece, lp in choice.top],
    }


def completion_logprobs(choices: list[TokenChoice], offset: int = 0) -> dict[str, Any]:
    """A completion choice's legacy `logprobs` object; `offset`: the text sent before these."""
    tokens = [token_text(c.piece) for c in choices]
    offsets: list[int] = []
    for c in choices:
        offsets.append(offset)
        offset += len(c.piece.decode("utf-8", errors="replace"))
    top = [{token_text(piece): lp for _, piece, lp in c.top} for c in choices]
    return {"tokens": tokens, "token_logprobs": [c.logprob for c in choices],
            "top_logprobs": top, "text_offset": offsets}


class LogprobsOut:
    """The log-probabilities of one response: collected per token, sent whole or per chunk
    (each streamed chunk carries those of the tokens since the last chunk sent)."""

    def __init__(self, kind: str, wanted: bool) -> None:
        self.kind, self.wanted = kind, wanted
        self._all: list[TokenChoice] = []
        self._sent = 0  # of _all, already in a chunk
        self._offset = 0  # completion text offset of the first unsent token

    def add(self, choice: TokenChoice | None) -> None:
        if self.wanted and choice is not None:
            self._all.append(choice)

    def cut(self, tail_bytes: int) -> None:
        """Leave out the tokens that begin within the last `tail_bytes` bytes of the text (a
        stop string and what came after it: OpenAI leaves them out). Tokens already sent in a
        chunk stay sent."""
        while len(self._all) > self._sent and tail_bytes > 0:
            tail_bytes -= len(self._all[-1].piece)
            if tail_bytes < 0:  # it began before the cut: its text is partly kept
                break
            self._all.pop()

    def whole(self) -> dict[str, Any] | None:
        if not self.wanted:
            return None
        return (chat_logprobs(self._all) if self.kind == "chat"
                else completion_logprobs(self._all))

    def pending(self) -> dict[str, Any] | None:
        """Those not yet sent (None when none or not asked for); they count as sent."""
        fresh = self._all[self._sent:]
        if not self.wanted or not fresh:
            return None
        self._sent = len(self._all)
        if self.kind == "chat":
            return chat_logprobs(fresh)
        out = completion_logprobs(fresh, self._offset)
        self._offset += sum(len(c.piece.decode("utf-8", errors="replace")) for c in fresh)
        return out
