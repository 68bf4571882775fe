"""The one config tree: every setting is declared once, and everything else is derived from it.

Each `Setting` in `SETTINGS` carries its type, default, range, unit, help, scope and CLI flags.
From those declarations come `Config` (the frozen value the engine takes), `validate()` and its
messages, `signature()` (what decides whether the model must be reopened), the CLI flags
and docs/settings.md (both in workbench/config_cli.py) and the settings panel.

`Config` spells its fields out so editors and type checkers see them, but takes every default
from the declarations, and an import-time check fails if the two ever disagree. Adding a setting
is one `Setting(...)` entry plus one field line.

Regenerate the docs after changing a declaration:  python -m workbench.config_cli > docs/settings.md
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import math
import operator
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

SettingType = Literal["int", "float", "bool", "str", "choice"]
Scope = Literal["load", "request"]  # load: baked in at open, a change reopens the model


class ConfigError(ValueError):
    """A config that cannot be built at all: an unknown key, or a drifted declaration."""


@dataclass(frozen=True, slots=True)
class Group:
    name: str
    blurb: str  # one line under the group's heading in the docs and the settings panel


# Order here is the order of the docs, the CLI help and the settings panel. Later groups
# ("Streaming", "Speed / quality") are appended here, not coded anywhere else.
GROUPS: list[Group] = [
    Group("Model", "What is loaded and how its memory is laid out; a change reopens the model"),
    Group("Sampling", "How the next token is picked from the model's scores"),
    Group("Chat", "What one reply may do"),
    Group("Streaming", "Expert streaming for MoE models: experts are read from disk as tokens "
          "route to them, so a model larger than memory runs; a change reopens the model"),
    Group("Speed / quality", "Lossy levers that trade answer quality for speed"),
    Group("Conversations", "What is kept of each conversation's model state, so that switching "
          "back to one costs only its new turn"),
    Group("Speculation", "Draft tokens cheaply and verify them in one batch: the same greedy "
          "answer in fewer decodes where the draft is right"),
]

# Operators a `requires` predicate may use; data, so the UI can say the condition in words.
OPS: dict[str, Callable[[Any, Any], bool]] = {
    ">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le,
    "==": operator.eq, "!=": operator.ne,
}
PY_TYPES: dict[str, type] = {"int": int, "float": float, "bool": bool, "str": str, "choice": str}


@dataclass(frozen=True, slots=True)
class Setting:
    """One declared setting. Numeric settings must name a unit, or say why they have none."""

    name: str  # Python attribute on Config; the long flag is derived from it
    type: SettingType
    default: Any
    label: str  # what the settings panel shows
    group: str  # a Group.name
    help: str  # one line, no trailing period
    scope: Scope
    unit: str | None = None  # "tokens", "threads", "MiB"; "" only together with unit_reason
    unit_reason: str = ""  # why a numeric setting has no unit
    choices: tuple[str, ...] = ()  # for type "choice"
    min: float | None = None
    max: float | None = None
    min_exclusive: bool = False  # the value must be above min, not equal to it
    special: tuple[tuple[Any, str], ...] = ()  # values with their own meaning: ((0, "greedy"),)
    requires: tuple[str, str, Any] | None = None  # (setting, op, value): meaningful only then
    short: tuple[str, ...] = ()  # short flags, e.g. ("-c",)
    aliases: tuple[str, ...] = ()  # extra long flags, e.g. ("--ctx-size",)
    false_aliases: tuple[str, ...] = ()  # bool only: extra flags that turn it off ("--raw")
    metavar: str = ""  # CLI placeholder; derived from the type when empty
    renamed_from: tuple[str, ...] = ()  # old preset keys that still load into this setting
    doc_default: str = ""  # the default as the docs show it, when it depends on the machine
    doc_max: str = ""  # the upper bound as the docs show it, when it depends on the machine
    # The only values the panel offers, with their labels: ((0.0, "off"), (0.5, "50 %")). The CLI
    # and presets still take any value in range.
    rungs: tuple[tuple[Any, str], ...] = ()
    # A condition beyond `requires` (which names one setting): (its text, its predicate). While
    # it fails the panel disables the setting and says why; a value off the default is then
    # ignored (without_ignored), while validate() still refuses it from a command line.
    gate: tuple[str, Callable[[Any], bool]] | None = None
    # The window's default while `gate` holds, where it differs from `default` (the CLI's and the
    # window's otherwise): the settings panel moves a value still at one default to the other as
    # the gate flips (follow_app_defaults below). None: the window uses `default`.
    app_default: Any = None
    # (threshold, text): from this value up the panel shows the text as a warning under the row
    # (a lossy setting whose harm does not show in the text it produces).
    warn_from: tuple[float, str] | None = None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def flags(self) -> tuple[str, ...]:
        return (*self.short, self.flag, *self.aliases)

    @property
    def numeric(self) -> bool:
        return self.type in ("int", "float")


# More compute threads than 4 lost speed upstream (spin-wait contention), and more than the
# machine has only adds contention.
_CORES = os.cpu_count() or 1
_DEFAULT_THREADS = min(4, _CORES)


def _physical_memory_mib() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1 << 20)
    except (ValueError, OSError):  # not reported on this platform: no machine-derived bound
        return 1 << 30


# Upper bounds. Every number reaches native code, where a wild one does harm a message cannot
# undo: 100,000 threads aborted the process (std::bad_alloc), 20,000 hung it, and a context of
# 2**32 + 16 tokens wrapped to 16 in llama.cpp's 32-bit field. Past a few threads per core only
# contention grows; a cache cannot exceed the memory it lives in.
MAX_THREADS = 4 * _CORES
MEMORY_MIB = _physical_memory_mib()
MAX_CTX = 1 << 20  # tokens: far past any trained context today, far below the 32-bit field
MAX_BATCH = 1 << 16  # tokens per prefill step or compute pass
_GREEDY = ("temp", ">", 0)
_CHAT = ("chat_template", "==", True)
_STREAMING = ("moe_stream", "==", True)
_AUTO_CACHE = ("cache_auto", "==", True)
_DROPPING = ("drop_cold_frac", ">", 0)
_SUBSTITUTING = ("expert_substitute", ">", 0)
_SPECULATING = ("spec", "!=", "off")


# The expert cache's eviction policies, declared once: name -> what it evicts first. The order is
# the native code (CachePolicy in native/src/cache_policy.h: 0 lru, 1 lfru, 2 layer), which
# moe/streamer.py and moe/cache_policies.py derive from here; tests/unit/test_cache_policies.py
# parses the header and checks it against this.
CACHE_POLICIES: dict[str, str] = {
    "lru": "least recent",
    "lfru": "frequency + recency",
    "layer": "layer-aware",
}


def _lru_cache_on(cfg: Any) -> bool:
    """Expert streaming with the LRU cache: a fixed budget or an automatic one."""
    return bool(cfg.moe_stream and (cfg.cache_auto or (isinstance(cfg.cache_mb, int)
                                                       and cfg.cache_mb > 0)))


ANSWER_FORMATS = ("text", "json", "schema")
TOOL_CHOICES = ("auto", "none", "required")  # engine/tools/calls.py: AUTO, NONE, REQUIRED

_CACHE_GATE = ("expert streaming is on with the LRU cache (cache_mb > 0 or cache_auto)",
               _lru_cache_on)

SETTINGS: tuple[Setting, ...] = (
    # Model: everything here is baked into the llama context at open.
    Setting("model", "str", "", "Model file", "Model",
            "GGUF file to load (the first shard of a split model)",
            "load", special=(("", "bundled model"),), short=("-m",), metavar="PATH",
            renamed_from=("model_path",)),
    Setting("n_ctx", "int", 4096, "Context", "Model",
            "Tokens the model can see at once: system prompt, history and reply together",
            "load", unit="tokens", min=16, short=("-c",), aliases=("--ctx-size",),
            max=MAX_CTX),
    Setting("n_batch", "int", 512, "Prefill chunk", "Model",
            "Prompt tokens decoded per step while reading the prompt (prefill)",
            "load", unit="tokens", min=1,
            max=MAX_BATCH),
    Setting("n_ubatch", "int", 0, "Compute batch", "Model",
            "Widest single compute pass; sizes the compute buffers reserved at load",
            "load", unit="tokens", min=0, special=((0, "follows n_batch"),), aliases=("--ubatch",),
            max=MAX_BATCH),
    Setting("n_threads", "int", _DEFAULT_THREADS, "Compute threads", "Model",
            "CPU threads that run the model's maths",
            "load", unit="threads", min=1, max=MAX_THREADS, short=("-t",),
            aliases=("--threads",), doc_max="4 × CPU count",
            doc_default="min(4, CPU count); streaming: the fastest measured at open"),
    Setting("chat_template", "bool", True, "Use chat template", "Model",
            "Wrap the conversation in the model's own chat template; off sends raw text",
            "load", false_aliases=("--raw",), renamed_from=("chatml",)),
    Setting("chat_template_file", "str", "", "Chat template file", "Model",
            "A Jinja chat template to use instead of the model's own (e.g. for a file that lacks "
            "one)", "load", special=(("", "the model's own"),), metavar="PATH",
            requires=_CHAT),
    Setting("mmproj", "str", "", "Image projector", "Model",
            "The model's image projector (an mmproj GGUF): lets the model see attached images",
            "load", special=(("", "none: images cannot be attached"),), metavar="PATH"),
    # Sampling: per request. Greedy (temp 0) is reproducible and ignores the other knobs.
    Setting("temp", "float", 0.0, "Temperature", "Sampling",
            "How adventurous sampling is; 0 (greedy) takes the likeliest token, reproducibly",
            "request", unit="", unit_reason="a divisor of the model's scores, dimensionless",
            min=0.0, special=((0, "greedy"),),
            max=100.0),
    Setting("top_k", "int", 40, "Top-k", "Sampling",
            "Sample only among the K most likely tokens",
            "request", unit="tokens", min=0, special=((0, "no limit"),), requires=_GREEDY,
            max=1 << 20),
    Setting("top_p", "float", 0.95, "Top-p", "Sampling",
            "Sample only among the most likely tokens whose probabilities add up to P",
            "request", unit="", unit_reason="a share of probability, between 0 and 1",
            min=0.0, min_exclusive=True, max=1.0, requires=_GREEDY),
    Setting("min_p", "float", 0.0, "Min-p", "Sampling",
            "Drop tokens less likely than P times the likeliest one",
            "request", unit="", unit_reason="a share of the top token's probability, 0 to 1",
            min=0.0, max=1.0, special=((0, "off"),), requires=_GREEDY),
    # Penalties act under greedy too (penalties, then argmax): a repeating greedy answer is
    # the case users reach for them.
    Setting("repeat_penalty", "float", 1.0, "Repetition penalty", "Sampling",
            "Divide the scores of tokens seen in the last N by this (above 1 repeats less)",
            "request", unit="", unit_reason="a divisor of the model's scores, dimensionless",
            min=0.0, min_exclusive=True, max=10.0, special=((1, "off"),)),
    Setting("presence_penalty", "float", 0.0, "Presence penalty", "Sampling",
            "Subtract this from the score of every token seen in the last N",
            "request", unit="", unit_reason="an offset on the model's scores, dimensionless",
            min=-2.0, max=2.0, special=((0, "off"),)),
    Setting("frequency_penalty", "float", 0.0, "Frequency penalty", "Sampling",
            "Subtract this times its count from the score of each token seen in the last N",
            "request", unit="", unit_reason="an offset on the model's scores, dimensionless",
            min=-2.0, max=2.0, special=((0, "off"),)),
    Setting("repeat_last_n", "int", 64, "Penalty window", "Sampling",
            "How many of the latest tokens the penalties look at",
            "request", unit="tokens", min=0, max=MAX_CTX, special=((0, "penalties off"),)),
    # -1 stands for "random"; llama.cpp reserves 2**32-1 (LLAMA_DEFAULT_SEED) for the same.
    Setting("seed", "int", -1, "Seed", "Sampling",
            "Random seed; the same seed, prompt and settings give the same reply",
            "request", unit="", unit_reason="an identifier for a random sequence, not a quantity",
            min=-1, max=2**32 - 2, special=((-1, "random"),), requires=_GREEDY),
    # Chat: per request.
    Setting("n_predict", "int", 512, "Tokens to generate", "Chat",
            "Most tokens one reply may generate (thinking included)",
            "request", unit="tokens", min=1, short=("-n",),
            max=MAX_CTX),
    Setting("think", "bool", True, "Thinking", "Chat",
            "Let reasoning models think before they answer",
            "request", requires=_CHAT),
    Setting("system_prompt", "str", "", "System prompt", "Chat",
            "Instructions sent as the system message; empty leaves it to the chat template",
            "request", metavar="TEXT", requires=_CHAT),
    # The answer's format (engine/answer_format.py): held to a grammar while it is sampled, the
    # same the server builds from `response_format`. A turn with tools follows their grammar.
    Setting("answer_format", "choice", "text", "Answer format", "Chat",
            "Free text, one JSON object, or JSON that validates against the answer schema",
            "request", choices=ANSWER_FORMATS),
    Setting("answer_schema", "str", "", "Answer schema", "Chat",
            "The JSON schema that answers in the schema format validate against",
            "request", metavar="JSON", requires=("answer_format", "==", "schema")),
    # The tools a conversation's model may call (ui/chat/tool_turns.py): the JSON array of a
    # tools file (OpenAI's `tools`, ui/chat/tools_file.py), loaded in the conversation's dialog.
    Setting("tools", "str", "", "Tools", "Chat",
            "Tools the model may call: a JSON array of OpenAI tool declarations (Load tools file)",
            "request", special=(("", "none"),), metavar="JSON", requires=_CHAT),
    Setting("tool_choice", "choice", "auto", "Tool choice", "Chat",
            "Whether the model decides to call a tool (auto), never calls one, or must call one",
            "request", choices=TOOL_CHOICES, requires=("tools", "!=", "")),
    Setting("auto_title", "bool", True, "Automatic titles", "Chat",
            "The window has the model name a new conversation after its first answer",
            "request", requires=_CHAT),
    Setting("token_alternatives", "int", 0, "Token alternatives", "Chat",
            "Likeliest alternatives the window shows per token, with probabilities; 0 off (on: no "
            "speculation)",
            "request", unit="tokens", min=0, max=20, special=((0, "off"),)),
    # Streaming: load-time; inert (and not validated) while streaming is off.
    Setting("moe_stream", "bool", False, "Stream experts", "Streaming",
            "Read each token's routed experts from disk instead of holding them all (MoE only)",
            "load"),
    Setting("cache_mb", "int", 0, "Expert cache", "Streaming",
            "Memory for recently routed experts; below one token's expert demand it hits nothing",
            "load", unit="MiB", min=0, max=MEMORY_MIB, doc_max="physical memory",
            special=((0, "off: every routed expert is read"),), requires=_STREAMING),
    Setting("cache_auto", "bool", False, "Size the cache automatically", "Streaming",
            "Size the expert cache once at load from the memory available", "load",
            requires=_STREAMING),
    Setting("cache_floor_mb", "int", 1536, "Memory left free", "Streaming",
            "Automatic sizing leaves this much memory available to everything else", "load",
            unit="MiB", min=0, requires=_AUTO_CACHE,
            max=MEMORY_MIB, doc_max="physical memory"),
    Setting("cache_ceil_mb", "int", 0, "Automatic size ceiling", "Streaming",
            "Largest cache automatic sizing may choose", "load", unit="MiB", min=0,
            special=((0, "no ceiling"),), requires=_AUTO_CACHE,
            max=MEMORY_MIB, doc_max="physical memory"),
    Setting("io_threads", "int", 4, "I/O lanes", "Streaming",
            "Parallel readers that fetch expert slices from disk", "load", unit="threads", min=1,
            max=8, requires=_STREAMING),
    Setting("o_direct", "bool", True, "Direct I/O", "Streaming",
            "Read experts with O_DIRECT, bypassing the page cache (buffered where refused)", "load",
            requires=_STREAMING),
    Setting("dense_weights", "choice", "anon", "Dense weights", "Streaming",
            "Non-expert weights: anon reads them once into private memory; mmap leaves them to "
            "the page cache", "load", choices=("anon", "mmap"),
            requires=_STREAMING),
    Setting("lean_load", "bool", True, "Lean load", "Streaming",
            "Read only metadata and dense weights at load, not the whole file (experts are read "
            "when routed)", "load", requires=_STREAMING),
    # Cache policies, warm start and prefetch (issue 24; native/src/cache_policy.h).
    Setting("cache_policy", "choice", "lru", "Cache policy", "Streaming",
            "What the cache evicts: "
            + ", ".join(f"{name} ({what})" for name, what in CACHE_POLICIES.items()), "load",
            choices=tuple(CACHE_POLICIES), gate=_CACHE_GATE),
    Setting("cache_guard", "bool", False, "Token-cycle guard", "Streaming",
            "Below one token's expert demand, keep a pinned subset instead of hitting nothing",
            "load", gate=_CACHE_GATE),
    Setting("cache_warm_start", "bool", True, "Warm start", "Streaming",
            "Remember a model's most routed experts and read them into the cache at open",
            "load", gate=_CACHE_GATE),
    Setting("prefetch", "bool", False, "Prefetch experts", "Streaming",
            "Read the next layer's likely experts while this layer computes (lost when measured)",
            "load", gate=_CACHE_GATE),
    Setting("n_expert_used", "int", 0, "Active experts", "Speed / quality",
            "Experts each token uses; fewer than the model's top-k is faster and lossy", "load",
            unit="experts", min=0, special=((0, "model default"),),
            max=1024),
    # Cache-aware dropping (upstream's --drop-cold-experts): lossy, and its output depends on
    # what the cache held, so it is not reproducible run to run.
    Setting("drop_cold_frac", "float", 0.0, "Drop cold experts", "Speed / quality",
            "Skip routed experts that miss the cache and weigh under this share of 1/top-k; lossy",
            "load", unit="", unit_reason="a share of the mean routing weight 1/top-k",
            min=0.0, max=1.0, special=((0, "off"),), aliases=("--drop-cold-experts",),
            metavar="F", rungs=((0.0, "off"), (0.5, "50 %"), (0.75, "75 %"), (1.0, "100 %")),
            gate=_CACHE_GATE, app_default=0.75,  # upstream's app: 75 % when streaming cached
            doc_default="0 (off); the window: 0.75 while streaming with a cache"),
    Setting("drop_renorm", "bool", True, "Renormalise after a drop", "Speed / quality",
            "Scale a token's kept experts back to the router's total weight after a drop",
            "load", requires=_DROPPING, false_aliases=("--drop-no-renorm",)),
    Setting("drop_prefill", "bool", False, "Drop while reading the prompt", "Speed / quality",
            "Also drop cold experts during the prefill (by default only generated tokens drop)",
            "load", requires=_DROPPING, aliases=("--drop-in-prefill",)),
    # Cache-aware substitution (upstream's --expert-substitute): lossy, cache-dependent like
    # dropping. Measured upstream: 0.15 cost +1-4 % perplexity, 0.30 about +25 %, 0.60 destroyed
    # the model while its text stayed fluent (docs/streaming.md).
    Setting("expert_substitute", "float", 0.0, "Prefer cached experts", "Speed / quality",
            "Let near-ties go to cached experts: their scores gain this share of the score "
            "range; lossy",
            "load", unit="", unit_reason="a share of the token's router score range (max - min)",
            min=0.0, max=1.0, special=((0, "off"),), metavar="L",
            rungs=((0.0, "off"), (0.10, "10 %"), (0.15, "15 %"), (0.20, "20 %"), (0.30, "30 %")),
            gate=_CACHE_GATE,
            warn_from=(0.20, "Replies will still read well while the model behind them is worse: "
                       "measured upstream, 15 % cost +1-4 % perplexity, 30 % about +25 %, and "
                       "60 % destroyed the model with fluent text")),
    Setting("expert_substitute_prefill", "bool", False, "Prefer cached experts in the prompt",
            "Speed / quality",
            "Also substitute while reading the prompt (by default only generated tokens do)",
            "load", requires=_SUBSTITUTING, aliases=("--substitute-in-prefill",)),
    # Conversations: per request (resizing the pool needs no reopen).
    Setting("kv_pool_mb", "int", -1, "Conversation memory", "Conversations",
            "Memory for the model state of other conversations, so switching back skips re-reading",
            "request", unit="MiB", min=-1, max=MEMORY_MIB, doc_max="physical memory",
            special=((-1, "automatic: a quarter of the memory available, at most 2048"),
                     (0, "none in memory; kv_disk_mb may still keep them on disk"))),
    Setting("kv_disk_mb", "int", 2048, "Conversation states on disk", "Conversations",
            "Disk for conversation states evicted from memory or kept at close, for restarts",
            "request", unit="MiB", min=0, max=1 << 24, special=((0, "off"),)),
    # Speculation (engine/speculation): greedy only, and the answer is the plain greedy answer.
    Setting("spec", "choice", "off", "Speculative decoding", "Speculation",
            "Draft tokens and verify them in one batch (ngram: from the conversation); greedy "
            "only",
            "request", choices=("off", "ngram", "draft")),
    Setting("spec_draft_max", "int", 32, "Longest draft", "Speculation",
            "Most tokens one verify step drafts; drafts shrink by themselves when rejected",
            "request", unit="tokens", min=1, max=64, requires=_SPECULATING),
    Setting("spec_draft_model", "str", "", "Draft model", "Speculation",
            "A small GGUF with the same vocabulary as the model, loaded beside it for --spec draft",
            "load", special=(("", "none"),), metavar="PATH"),
)

BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
RENAMED: dict[str, str] = {old: s.name for s in SETTINGS for old in s.renamed_from}

# A conversation's own settings: kept per conversation by the store, set from its header's
# dialog, applied as it opens (ui/chat/conversation_settings.py). All per-request: opening a
# conversation never reloads the model. Named here, once; checked below.
CONVERSATION_SETTINGS: tuple[str, ...] = (
    "system_prompt", "temp", "top_k", "top_p", "min_p", "repeat_penalty", "presence_penalty",
    "frequency_penalty", "repeat_last_n", "seed", "token_alternatives", "answer_format",
    "answer_schema", "tools", "tool_choice",
)


def _check_conversation_settings(names: tuple[str, ...] = CONVERSATION_SETTINGS) -> None:
    bad = [n for n in names if n not in BY_NAME or BY_NAME[n].scope != "request"]
    if bad or len(set(names)) != len(names):
        raise ConfigError(f"CONVERSATION_SETTINGS must name distinct request-scope settings; "
                          f"not so: {', '.join(bad) or 'a duplicate'}")


_check_conversation_settings()


def _default(name: str) -> Any:
    return BY_NAME[name].default


@dataclass(frozen=True, slots=True)
class Config:
    """Every setting's value; build with `Config()`, `replace()` or `from_dict()`."""

    model: str = _default("model")
    n_ctx: int = _default("n_ctx")
    n_batch: int = _default("n_batch")
    n_ubatch: int = _default("n_ubatch")
    n_threads: int = _default("n_threads")
    chat_template: bool = _default("chat_template")
    chat_template_file: str = _default("chat_template_file")
    mmproj: str = _default("mmproj")
    temp: float = _default("temp")
    top_k: int = _default("top_k")
    top_p: float = _default("top_p")
    min_p: float = _default("min_p")
    repeat_penalty: float = _default("repeat_penalty")
    presence_penalty: float = _default("presence_penalty")
    frequency_penalty: float = _default("frequency_penalty")
    repeat_last_n: int = _default("repeat_last_n")
    seed: int = _default("seed")
    n_predict: int = _default("n_predict")
    think: bool = _default("think")
    system_prompt: str = _default("system_prompt")
    answer_format: str = _default("answer_format")
    answer_schema: str = _default("answer_schema")
    tools: str = _default("tools")
    tool_choice: str = _default("tool_choice")
    auto_title: bool = _default("auto_title")
    token_alternatives: int = _default("token_alternatives")
    moe_stream: bool = _default("moe_stream")
    cache_mb: int = _default("cache_mb")
    cache_auto: bool = _default("cache_auto")
    cache_floor_mb: int = _default("cache_floor_mb")
    cache_ceil_mb: int = _default("cache_ceil_mb")
    io_threads: int = _default("io_threads")
    o_direct: bool = _default("o_direct")
    dense_weights: str = _default("dense_weights")
    lean_load: bool = _default("lean_load")
    cache_policy: str = _default("cache_policy")
    cache_guard: bool = _default("cache_guard")
    cache_warm_start: bool = _default("cache_warm_start")
    prefetch: bool = _default("prefetch")
    n_expert_used: int = _default("n_expert_used")
    drop_cold_frac: float = _default("drop_cold_frac")
    drop_renorm: bool = _default("drop_renorm")
    drop_prefill: bool = _default("drop_prefill")
    expert_substitute: float = _default("expert_substitute")
    expert_substitute_prefill: bool = _default("expert_substitute_prefill")
    kv_pool_mb: int = _default("kv_pool_mb")
    kv_disk_mb: int = _default("kv_disk_mb")
    spec: str = _default("spec")
    spec_draft_max: int = _default("spec_draft_max")
    spec_draft_model: str = _default("spec_draft_model")

    def replace(self, **changes: Any) -> Config:
        for key in changes:
            _known(key)
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return {s.name: getattr(self, s.name) for s in SETTINGS}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Config:
        """Missing keys take their defaults; old names are mapped; wrong types wait for validate."""
        return cls(**setting_names(d))

    def diff_from_defaults(self) -> dict[str, Any]:
        return {k: v for k, v in self.to_dict().items() if v != BY_NAME[k].default}


def setting_names(d: Mapping[str, Any]) -> dict[str, Any]:
    """The same values keyed by today's setting names (old preset keys mapped).

    ConfigError for a key no setting knows, or for an old and a new name that set one setting.
    """
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for key, value in d.items():
        name = RENAMED.get(key) or _known(key)
        if name in values:
            raise ConfigError(f"'{origin[name]}' and '{key}' both set {name}; keep only '{name}'")
        values[name], origin[name] = value, key
    return values


def _known(key: str) -> str:
    if key in BY_NAME:
        return key
    close = difflib.get_close_matches(key, [*BY_NAME, *RENAMED], n=1)
    hint = (f"; did you mean '{RENAMED.get(close[0], close[0])}'?" if close
            else f"; known settings: {', '.join(BY_NAME)}")
    raise ConfigError(f"unknown setting '{key}'{hint}")


def check_config_class(cls: type, settings: Iterable[Setting] = SETTINGS) -> None:
    """Raise ConfigError unless `cls` has exactly one field per setting, same order/type/default."""
    have = [(f.name, getattr(f.type, "__name__", f.type), f.default)
            for f in dataclasses.fields(cls)]
    want = [(s.name, PY_TYPES[s.type].__name__, s.default) for s in settings]
    if have != want:
        drift = [f"{h} != {w}" for h, w in zip(have, want, strict=False) if h != w]
        drift += [f"only in {cls.__name__}: {h}" for h in have[len(want):]]
        drift += [f"no field for: {w}" for w in want[len(have):]]
        raise ConfigError(f"{cls.__name__} drifted from SETTINGS: " + "; ".join(drift))


check_config_class(Config)


# -- Reading a setting's metadata against a value ----------------------------------------------

def type_ok(s: Setting, value: Any) -> bool:
    if s.type == "bool":
        return isinstance(value, bool)
    if s.type == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if s.type == "float":  # an int is a fine float (JSON writes 1.0 as 1)
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, str)


def is_active(s: Setting, cfg: Config) -> bool:
    """False when the setting's `requires` does not hold, so its value is ignored."""
    if s.requires is None:
        return True
    name, op, want = s.requires
    try:
        return bool(OPS[op](getattr(cfg, name), want))
    except TypeError:  # the other setting has a wrong type; validate() reports that one
        return False


def gate_reason(s: Setting, cfg: Config) -> str:
    """Why the panel disables a gated setting now: whenever its gate fails. A value off its
    default is then kept but ignored (`without_ignored`), and the reason says so."""
    if s.gate is None or s.gate[1](cfg):
        return ""
    value = getattr(cfg, s.name)
    if value == s.default:
        return f"Only used when {s.gate[0]}"
    return (f"Ignored: {format_value(s, value)} is kept but not used until {s.gate[0]}; "
            f"until then it is {format_value(s, s.default)}")


def warning_text(s: Setting, cfg: Config) -> str:
    """The setting's declared warning when its value in `cfg` reaches the threshold; ""."""
    if s.warn_from is None:
        return ""
    value = getattr(cfg, s.name)
    threshold, text = s.warn_from
    try:
        return text if value >= threshold else ""
    except TypeError:  # a wrong type; validate() reports it
        return ""


def without_ignored(cfg: Config) -> Config:
    """`cfg` with every gated setting whose gate fails back at its default: what is in force
    when, say, streaming is turned off in the panel while dropping is set. The panel applies
    this (dropping greys out, is ignored and says why) rather than blocking Apply; validate()
    still refuses the raw combination typed on a command line."""
    off = {s.name: s.default for s in SETTINGS
           if s.gate is not None and not s.gate[1](cfg) and getattr(cfg, s.name) != s.default}
    return cfg.replace(**off) if off else cfg


def follow_app_defaults(before: Config, after: Config) -> Config:
    """`after` with every setting that has a window default (`Setting.app_default`) moved to the
    default of its new situation, when an edit flipped its gate and it still sat at the default
    of the old one. So dropping turns to 75 % when the cache comes on and back off with it; a
    value the user chose (say 50 %) is left as it is, and validate() says if it no longer fits."""
    changes = {}
    for s in SETTINGS:
        if s.app_default is None or s.gate is None:
            continue
        was, now = s.gate[1](before), s.gate[1](after)
        old_default = s.app_default if was else s.default
        if was != now and getattr(after, s.name) == old_default:
            changes[s.name] = s.app_default if now else s.default
    return after.replace(**changes) if changes else after


def requires_text(s: Setting) -> str:
    if s.gate is not None:
        return s.gate[0]
    if s.requires is None:
        return ""
    name, op, want = s.requires
    if isinstance(want, bool) and op == "==":
        return f"{name} is {'on' if want else 'off'}"
    if want == "" and op == "!=":
        return f"{name} is set"
    return f"{name} {op} {fmt_number(want)}"


def inactive_reason(s: Setting, cfg: Config) -> str:
    """Why the panel disables this setting right now; "" while it is in use."""
    if s.gate is not None:
        return gate_reason(s, cfg)
    if is_active(s, cfg) or s.requires is None:
        return ""
    other = BY_NAME[s.requires[0]]
    now = format_value(other, getattr(cfg, other.name))
    return f"Only used when {requires_text(s)} ({other.name} is {now} now)"


def specials_text(s: Setting, skip: Any = None) -> str:
    """The values with their own meaning, in words: "0 = no limit" (leaving out `skip`)."""
    return ", ".join(f"{_show(v)} = {t}" for v, t in s.special if v != skip)


def fmt_number(x: Any) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _show(x: Any) -> str:
    return f'"{x}"' if isinstance(x, str) else fmt_number(x)


def format_value(s: Setting, value: Any, unit: bool = False) -> str:
    """A value as a person reads it: on/off, quoted text, numbers with unit and special meaning."""
    if isinstance(value, bool):
        return "on" if value else "off"
    text = _show(value) + (f" {s.unit}" if unit and s.unit and s.numeric else "")
    meaning = dict(s.special).get(value)
    return text + (f" ({meaning})" if meaning else "")


def range_text(s: Setting) -> str:
    """The declared range as the docs show it: "16 – 1048576", "1 – 4 × CPU count", "≥ 0"."""
    if not s.numeric or (s.min is None and s.max is None):
        return ""
    high = s.doc_max or (fmt_number(s.max) if s.max is not None else "")
    low = fmt_number(s.min) if s.min is not None else ""
    if not high:
        return f"> {low}" if s.min_exclusive else f"≥ {low}"
    if not low:
        return f"≤ {high}"
    return f"{'>' if s.min_exclusive else ''}{low} – {high}"


def _bounds(s: Setting) -> tuple[str, str]:
    """The declared range in words, and what to set: ("at least 16", "16 or more")."""
    lo, hi = fmt_number(s.min), fmt_number(s.max)
    if s.min is None:
        return f"at most {hi}", f"{hi} or less"
    if s.max is None:
        if s.min_exclusive:
            return f"above {lo}", f"a value above {lo}"
        return f"at least {lo}", f"{lo} or more"
    want = f"above {lo} and at most {hi}" if s.min_exclusive else f"from {lo} to {hi}"
    return want, f"a value {want}"


def range_problem(s: Setting, value: Any) -> str:
    """What is wrong with a well-typed value against the declared range; "" when it is fine."""
    if s.type == "choice" and value not in s.choices:
        return f"{s.name} is '{value}'; it must be one of {', '.join(s.choices)}: set {s.flag}"
    if not s.numeric:
        return ""
    finite = s.type == "int" or math.isfinite(value)
    low = s.min is not None and (value <= s.min if s.min_exclusive else value < s.min)
    high = s.max is not None and value > s.max
    if finite and not low and not high:
        return ""
    want, fix = _bounds(s)
    unit = f" {s.unit}" if s.unit else ""
    meanings = specials_text(s)
    return (f"{s.name} is {fmt_number(value)}{unit}; it must be "
            f"{'' if finite else 'a finite number, '}{want}{unit}"
            f"{f' ({meanings})' if meanings else ''}: set {s.flag} to {fix}")


# -- validate() -----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Problem:
    setting: str
    message: str  # what is wrong and what to do, with the numbers

    def __str__(self) -> str:
        return f"{self.setting}: {self.message}"


Rule = Callable[[Config], list[Problem]]
_KINDS = {"int": "a whole number", "float": "a number", "bool": "true or false"}


def check_types(cfg: Config) -> list[Problem]:
    out = []
    for s in SETTINGS:
        value = getattr(cfg, s.name)
        if not type_ok(s, value):
            out.append(Problem(s.name, f"{s.name} must be {_KINDS.get(s.type, 'text')} like "
                               f"{s.default!r}, not {value!r} ({type(value).__name__}); "
                               f"fix the preset or pass {s.flag}"))
    return out


def check_ranges(cfg: Config) -> list[Problem]:
    """Declared ranges, only where the setting matters: sampling knobs are inert under greedy."""
    out = []
    for s in SETTINGS:
        value = getattr(cfg, s.name)
        if type_ok(s, value) and is_active(s, cfg) and (msg := range_problem(s, value)):
            out.append(Problem(s.name, msg))
    return out


def _sound(cfg: Config, *names: str) -> bool:
    """These settings pass their own checks, so a rule relating them says something new."""
    return all(type_ok(BY_NAME[n], v := getattr(cfg, n)) and not range_problem(BY_NAME[n], v)
               for n in names)


def check_ubatch_fits_context(cfg: Config) -> list[Problem]:
    if not _sound(cfg, "n_ubatch", "n_ctx") or cfg.n_ubatch <= cfg.n_ctx:
        return []
    return [Problem("n_ubatch", f"n_ubatch={cfg.n_ubatch} exceeds n_ctx={cfg.n_ctx}: the compute "
                    "buffers would be reserved for a batch that cannot occur; set --n-ubatch to "
                    f"{cfg.n_ctx} or less (0 follows n_batch)")]


def check_reply_fits_context(cfg: Config) -> list[Problem]:
    if not _sound(cfg, "n_predict", "n_ctx") or cfg.n_predict < cfg.n_ctx:
        return []
    return [Problem("n_predict", f"tokens to generate ({cfg.n_predict}) must be smaller than the "
                    f"context ({cfg.n_ctx}) to leave room for the prompt; lower --n-predict below "
                    f"{cfg.n_ctx} or raise --n-ctx above {cfg.n_predict}")]


# Run in order; a later task appends its rules (streaming) here.
def check_one_cache_size(cfg: Config) -> list[Problem]:
    fixed = _sound(cfg, "cache_mb") and cfg.cache_mb > 0
    if not (cfg.moe_stream and cfg.cache_auto and fixed):
        return []
    return [Problem("cache_mb", f"cache_mb={cfg.cache_mb} and cache_auto both size the expert "
                    "cache: set cache_mb to 0 to size it automatically, or turn cache_auto off")]


def check_drop_needs_the_cache(cfg: Config) -> list[Problem]:
    if not _sound(cfg, "drop_cold_frac") or cfg.drop_cold_frac == 0 or _lru_cache_on(cfg):
        return []
    frac = f"drop_cold_frac={cfg.drop_cold_frac:g}"
    if not cfg.moe_stream:
        why = ("expert streaming is off, so every expert is resident and none is a cache miss: "
               "there is nothing cold to drop")
    else:
        why = ("the expert cache is off, so every routed expert is a miss and the policy would "
               "be an unconditional cut of low-weight experts, not a cache-aware drop")
    return [Problem("drop_cold_frac", f"{frac} drops routed experts that miss the expert cache, "
                    f"but {why}. Stream with a cache (--moe-stream with --cache-mb N or "
                    "--cache-auto), or set --drop-cold-experts 0")]


def check_substitute_needs_the_cache(cfg: Config) -> list[Problem]:
    if (not _sound(cfg, "expert_substitute") or cfg.expert_substitute == 0
            or _lru_cache_on(cfg)):
        return []
    where = "expert streaming is off" if not cfg.moe_stream else "the expert cache is off"
    return [Problem("expert_substitute", f"expert_substitute={cfg.expert_substitute:g} prefers "
                    f"experts already in the expert cache, but {where}, so there is nothing to "
                    "prefer. Stream with a cache (--moe-stream with --cache-mb N or "
                    "--cache-auto), or set --expert-substitute 0")]


def check_draft_source(cfg: Config) -> list[Problem]:
    out = []
    if cfg.spec == "draft" and not cfg.spec_draft_model:
        out.append(Problem("spec", "spec=draft drafts with a draft model, but none is set: choose "
                           "one (--spec-draft-model PATH, a small GGUF with this model's "
                           "vocabulary) or use --spec ngram, which needs none"))
    if (cfg.spec != "off" and _sound(cfg, "spec_draft_max", "n_batch")
            and cfg.spec_draft_max >= cfg.n_batch):
        out.append(Problem("spec_draft_max", f"a verify step decodes the token and its draft in "
                           f"one batch ({cfg.spec_draft_max + 1} tokens), more than n_batch="
                           f"{cfg.n_batch}; lower --spec-draft-max below {cfg.n_batch}"))
    return out


def check_answer_schema(cfg: Config) -> list[Problem]:
    """The schema format needs a schema: JSON text of an object (whether the grammar can hold
    an answer to it is the engine's check, engine/answer_format.py: it needs the backend)."""
    if cfg.answer_format != "schema" or not isinstance(cfg.answer_schema, str):
        return []
    if not cfg.answer_schema.strip():
        return [Problem("answer_schema", "the schema answer format needs a JSON schema: paste "
                        "one or load it from a file, or choose the text or json format")]
    try:
        value = json.loads(cfg.answer_schema)
    except (ValueError, RecursionError) as exc:
        return [Problem("answer_schema", f"the answer schema is not JSON ({exc}); fix it or "
                        "load the schema from a file")]
    if not isinstance(value, dict):
        return [Problem("answer_schema", "the answer schema must be a JSON object (a JSON "
                        f"schema), not {type(value).__name__}")]
    return []


def check_tools(cfg: Config) -> list[Problem]:
    """Tools are a JSON array (each declaration is the tools file reader's check,
    ui/chat/tools_file.py, which the window applies again before a turn uses them)."""
    if not isinstance(cfg.tools, str) or not cfg.tools.strip():
        return []
    try:
        value = json.loads(cfg.tools)
    except (ValueError, RecursionError) as exc:
        return [Problem("tools", f"the tools are not JSON ({exc}); load them from a tools file")]
    if not isinstance(value, list):
        return [Problem("tools", "the tools must be a JSON array of tool declarations, not "
                        f"{type(value).__name__}; load them from a tools file")]
    return []


RULES: list[Rule] = [check_types, check_ranges, check_ubatch_fits_context, check_reply_fits_context,
                     check_one_cache_size, check_drop_needs_the_cache,
                     check_substitute_needs_the_cache, check_draft_source, check_answer_schema,
                     check_tools]


def validate(cfg: Config) -> list[Problem]:
    """Every problem with `cfg` (empty when it is usable), not just the first."""
    return [p for rule in RULES for p in rule(cfg)]


def signature(cfg: Config) -> str:
    """A stable hash of the load-scope settings: equal signatures can share an open model."""
    load = {s.name: getattr(cfg, s.name) for s in SETTINGS if s.scope == "load"}
    blob = json.dumps(load, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
