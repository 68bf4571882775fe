"""Render a GGUF's own chat template (Jinja2, sandboxed) the way real templates expect.

BOS contract (the session relies on it):
    ``render()`` returns exactly what the template prints. Templates that print ``{{ bos_token }}``
    (Gemma, Llama 3, LFM2, ...) therefore produce text that *starts with* ``bos_token``; ChatML
    templates (Qwen, SmolLM) do not. ``render()`` never adds or removes a BOS itself. The session
    strips one leading ``bos_token`` (see ``strip_leading_bos``) and tokenizes with
    ``add_special=True``, so the tokenizer adds the model's BOS exactly once (equivalently: it
    tokenizes without specials and inserts the BOS token id itself, once). EOS is printed only
    where the template prints it (closed past turns), never appended by us.

Fallback: a template that cannot render raises ``TemplateError``; its message says what failed and
what happens instead (the session sends that turn as plain text, so the model stays usable; see
docs/chat.md). A GGUF without any template gets a built-in one (chat/fallback.py).
"""

from __future__ import annotations

import copy
import functools
import json
import re
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from types import FrameType
from typing import Any

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import SandboxedEnvironment

from workbench.engine.tools.messages import template_calls

# What the session does instead (workbench/engine/session.py): the user's text goes to the model
# as plain text for this turn, without the conversation around it.
FALLBACK_NOTE = "this turn is sent to the model as plain text instead"


class TemplateError(Exception):
    """The chat template could not be compiled or rendered."""


class _RaisedByTemplate(Exception):
    """A template called raise_exception(): its own words, kept for the TemplateError."""


# A real template renders a conversation in milliseconds; one that takes seconds loops without
# end (nested loops over huge ranges, a list that grows while it is walked). Past this budget
# the render stops, and the template is remembered as runaway so that no later render (the
# thinking probes at load, every turn) waits for it again.
RENDER_BUDGET_S = 2.0
_RUNAWAY: set[str] = set()
_runaway_lock = threading.Lock()
_TEMPLATE_FILE = "<template>"  # the code file name of templates compiled from a string


class _RenderTooLong(Exception):
    pass


class _RenderBudget:
    """A trace function that ends a render past its deadline. It traces only the template's own
    frames (compiled Jinja code), so the rest of Python runs at full speed meanwhile."""

    CHECK_EVERY = 256  # line events between clock reads

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds
        self.events = 0

    def on_call(self, frame: FrameType, event: str, arg: Any) -> Any:
        return self.on_line if frame.f_code.co_filename == _TEMPLATE_FILE else None

    def on_line(self, frame: FrameType, event: str, arg: Any) -> Any:
        self.events += 1
        if self.events % self.CHECK_EVERY == 0 and time.monotonic() > self.deadline:
            raise _RenderTooLong
        return self.on_line


def _render_bounded(template: jinja2.Template, context: dict[str, Any]) -> str:
    budget = _RenderBudget(RENDER_BUDGET_S)
    previous = sys.gettrace()  # a debugger's or coverage's tracer comes back afterwards
    sys.settrace(budget.on_call)
    try:
        return template.render(**context)
    finally:
        sys.settrace(previous)


class _GenerationTag(jinja2.ext.Extension):
    """Hugging Face's ``{% generation %}...{% endgeneration %}`` marks assistant text for training
    masks; for rendering it is transparent, so its body is emitted unchanged."""

    tags = {"generation"}  # noqa: RUF012 (jinja2 reads a class attribute)

    def parse(self, parser: Any) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body, lineno=lineno)


def function_variables(source: str, tools: list[dict[str, Any]]) -> dict[str, Any]:
    """What firefunction-style templates read instead of `tools`: `functions` (the functions'
    JSON text) and `datetime`, as llama.cpp passes them."""
    if "functions" not in source:
        return {}
    functions = [t.get("function", t) for t in tools]
    return {"functions": json.dumps(functions, ensure_ascii=False, indent=2),
            "datetime": datetime.now().strftime("%b %d %Y %H:%M:%S GMT")}


def cohere_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tools as Command R's tool-use template reads them: name, description and
    `parameter_definitions` (each parameter's type, description and whether it is required)."""
    out = []
    for tool in tools:
        function = tool.get("function", tool)
        schema = function.get("parameters") or {}
        required = set(schema.get("required", []))
        out.append({"name": function.get("name", ""),
                    "description": function.get("description", ""),
                    "parameter_definitions": {
                        name: {"type": prop.get("type", "object"),
                               "description": prop.get("description", ""),
                               "required": name in required}
                        for name, prop in schema.get("properties", {}).items()}})
    return out


def _raise_exception(message: str) -> None:
    raise _RaisedByTemplate(str(message))


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    # Jinja's built-in tojson HTML-escapes <, >, & and ' (\u003c ...), which would corrupt tool
    # schemas in the prompt; templates are written against Hugging Face's plain json.dumps.
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys,
        default=_listed,
    )


def _listed(value: Any) -> Any:
    """A filter's lazy sequence (`tools | map(attribute='function')`) as the list it yields,
    as Python's Jinja users expect from tojson (DeepSeek R1's llama.cpp template)."""
    if isinstance(value, Iterator):
        return list(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


@functools.cache
def _environment() -> SandboxedEnvironment:
    # trim_blocks + lstrip_blocks is what Hugging Face and llama.cpp's minja use; without them
    # most templates leak newlines between turns. The sandbox (not the immutable one) because a
    # few templates append to lists they built themselves; callers' data is deep-copied first.
    env = SandboxedEnvironment(
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
        extensions=[jinja2.ext.loopcontrols, jinja2.ext.do, _GenerationTag],
        undefined=jinja2.Undefined,
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


@functools.lru_cache(maxsize=16)
def _compile(source: str) -> jinja2.Template:
    return _environment().from_string(source)


_TESTS_NONE_CONTENT = re.compile(r"content['\"]?\]?\s+is\s+none")


def _template_messages(source: str, messages: list[dict[str, str]],
                       object_arguments: bool = True) -> list[dict[str, Any]]:
    """Copy the caller's messages and add the field names this template reads past reasoning
    from: gpt-oss and LFM2 read ``thinking``, Gemma 4 ``reasoning``, most ``reasoning_content``."""
    out: list[dict[str, Any]] = []
    for message in messages:
        m: dict[str, Any] = copy.deepcopy(dict(message))
        if isinstance(m.get("tool_calls"), str):  # JSON text in the conversation; objects here
            m["tool_calls"] = template_calls(m["tool_calls"], object_arguments)
            if (not m.get("content") and _TESTS_NONE_CONTENT.search(source)
                    and "content'] == ''" not in source):
                m["content"] = None  # as clients send it: DeepSeek R1 prints calls only then
        reasoning = m.get("reasoning_content")
        if m.get("role") == "assistant" and reasoning:
            if "thinking" not in m and "thinking" in source:
                m["thinking"] = reasoning
            if "reasoning" not in m and "'reasoning'" in source:
                m["reasoning"] = reasoning
        elif "reasoning_content" in m and not reasoning:
            del m["reasoning_content"]  # an empty field would render an empty thought block
        out.append(m)
    return out


_EFFORT_OFF = re.compile(r"reasoning_effort[^%}\n]{0,40}?['\"](no_think|none|minimal)['\"]")
# The top-level enable_thinking variable being read (not a namespace field of the same name).
_READS_ENABLE_THINKING = re.compile(
    r"(?<![.\w])enable_thinking\s*(is\b|==|!=|and\b|or\b|%|\||\))|if\s+(not\s+)?enable_thinking\b"
)
_REASONING_VAR = re.compile(r"\breasoning\s+is\s+(not\s+)?(un)?defined")


def thinking_context(source: str, enable_thinking: bool) -> dict[str, Any]:
    """Template variables that carry the thinking switch. ``enable_thinking`` is the Hugging Face
    convention; some families read their own name instead (DeepSeek V3.1, Kimi K3 and Granite
    ``thinking``, Cohere ``reasoning``, MiniMax M3 ``thinking_mode``, Hunyuan/Solar/Cohere a
    ``reasoning_effort`` level), so the same switch is passed under those names where the source
    reads them. Levels are only set when the template names an "off" level, so gpt-oss keeps its
    own default effort."""
    ctx: dict[str, Any] = {"enable_thinking": enable_thinking, "thinking": enable_thinking}
    if _REASONING_VAR.search(source):
        ctx["reasoning"] = enable_thinking
    if "thinking_budget" in source and not enable_thinking:
        ctx["thinking_budget"] = 0  # Seed-OSS: a zero budget is its "answer directly" mode
    if "thinking_mode" in source:
        ctx["thinking_mode"] = "enabled" if enable_thinking else "disabled"
    off_level = _EFFORT_OFF.search(source)
    if off_level and not enable_thinking:
        ctx["reasoning_effort"] = off_level.group(1)
    elif off_level and enable_thinking and off_level.group(1) == "no_think":
        ctx["reasoning_effort"] = "high"  # this family does not think unless asked to
    return ctx


@dataclass(frozen=True)
class ChatTemplate:
    """A chat template as stored in the GGUF (``tokenizer.chat_template``) plus its special tokens.

    ``bos_token`` / ``eos_token`` are the token *texts* (e.g. "<bos>", "<|im_end|>")."""

    source: str
    bos_token: str
    eos_token: str
    name: str = "the chat template"  # where it came from, for messages ("the template file x")

    def render(
        self,
        messages: list[dict[str, str]],
        *,
        add_generation_prompt: bool = True,
        enable_thinking: bool = True,
        tools: list[dict[str, Any]] | None = None,
    ) -> str:
        """Render ``messages`` (role, content, optional reasoning_content, tool_calls as JSON
        text, tool_call_id) to prompt text; ``tools`` (OpenAI's declarations) become the
        template's ``tools`` variable.

        See the module docstring for the BOS contract. A template that refuses a system role
        (Gemma 2) gets the system prompt folded into the first user message, as llama.cpp does.
        Raises TemplateError."""
        if messages and messages[0].get("role") == "system" and not _supports_system(self):
            messages = _fold_system(messages)
        if not enable_thinking and _reads_soft_switch(self.source):
            messages = _add_soft_switch(messages)
        return self._render_raw(messages, add_generation_prompt, enable_thinking, tools)

    def _render_raw(
        self, messages: list[dict[str, str]], add_generation_prompt: bool, enable_thinking: bool,
        tools: list[dict[str, Any]] | None = None, object_arguments: bool | None = None,
    ) -> str:
        """`object_arguments`: past calls' arguments as objects (most templates print them with
        tojson) or as their JSON text; None: objects, and if the template fails on them, text
        (Functionary v3.2 concatenates them as a string)."""
        if object_arguments is None:
            if not any(m.get("tool_calls") for m in messages):
                object_arguments = True
            else:
                try:
                    return self._render_raw(messages, add_generation_prompt, enable_thinking,
                                            tools, True)
                except TemplateError:
                    object_arguments = False
        try:
            template = _compile(self.source)
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(
                f"chat template does not compile (line {exc.lineno}: {exc.message}); "
                + FALLBACK_NOTE
            ) from exc
        context: dict[str, Any] = {
            "messages": _template_messages(self.source, messages, object_arguments),
            "add_generation_prompt": add_generation_prompt,
            **thinking_context(self.source, enable_thinking),
            "bos_token": self.bos_token,
            "eos_token": self.eos_token,
        }
        if tools:  # otherwise undefined, as in Hugging Face: several templates iterate it blindly
            context["tools"] = (cohere_tools(tools) if "parameter_definitions" in self.source
                                else copy.deepcopy(tools))
            context.update(function_variables(self.source, tools))
        if self.source in _RUNAWAY:
            raise TemplateError(self._runaway_message())
        try:
            return _render_bounded(template, context)
        except _RenderTooLong:
            with _runaway_lock:
                _RUNAWAY.add(self.source)
            raise TemplateError(self._runaway_message()) from None
        except _RaisedByTemplate as exc:
            raise TemplateError(
                f"chat template refused the conversation ({exc}); " + FALLBACK_NOTE
            ) from exc
        except Exception as exc:  # any failure inside a third-party template is its bug
            raise TemplateError(
                f"chat template failed to render ({type(exc).__name__}: {exc}); " + FALLBACK_NOTE
            ) from exc

    def _runaway_message(self) -> str:
        return (f"{self.name} did not finish rendering within {RENDER_BUDGET_S:g} s (it loops "
                "without end, or nearly); " + FALLBACK_NOTE + ". Choose another chat template "
                "file, or turn the chat template off")


_SYSTEM_PROBE = "\u2063workbench-system-probe\u2063"


@functools.lru_cache(maxsize=16)
def _supports_system(template: ChatTemplate) -> bool:
    """Whether the template prints a system message (probed once per template)."""
    probe = [{"role": "system", "content": _SYSTEM_PROBE}, {"role": "user", "content": "hi"}]
    try:
        return _SYSTEM_PROBE in template._render_raw(probe, True, True)
    except TemplateError:
        return False


def _fold_system(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    system, rest = messages[0], list(messages[1:])
    if rest and rest[0].get("role") == "user":
        first = dict(rest[0])
        first["content"] = system.get("content", "") + "\n\n" + first.get("content", "")
        return [first, *rest[1:]]
    return rest  # nowhere to put it; a template that refuses it cannot show it


def _reads_soft_switch(source: str) -> bool:
    """Nemotron Nano v2 takes thinking on/off only from a "/no_think" in the conversation (it
    strips the marker before printing); templates that also read enable_thinking do not need it."""
    return "'/no_think'" in source and not _READS_ENABLE_THINKING.search(source)


def _add_soft_switch(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    if messages and messages[0].get("role") == "system":
        system = dict(messages[0])
        system["content"] = system.get("content", "") + " /no_think"
        return [system, *messages[1:]]
    return [{"role": "system", "content": "/no_think"}, *messages]


def strip_leading_bos(text: str, bos_token: str) -> str:
    """Drop one leading BOS text so tokenizing with add_special=True adds it exactly once."""
    if bos_token and text.startswith(bos_token):
        return text[len(bos_token) :]
    return text
