"""A conversation's own settings: the system prompt, the sampling settings and the answer format
it was last used with, over the global settings as defaults (Qt-free).

The store keeps them per conversation (`conversations.settings`, by setting name). Opening a
conversation applies them to the open session (all are per-request: no reload); a new one
starts from the global settings. Only these keys are a conversation's: the model and its
load-time settings stay the window's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workbench.config import Config, validate
from workbench.store.conversations import SETTING_KEYS

KEYS = SETTING_KEYS  # what the store keeps per conversation is what the window applies


def settings_of(config: Config) -> dict[str, Any]:
    return {name: getattr(config, name) for name in sorted(KEYS)}


def config_for(base: Config, stored: Mapping[str, Any]) -> Config:
    """`base` (the global settings) with the conversation's own values. Unknown keys are
    ignored; stored values that do not validate (another version's) leave `base` as it is."""
    own = {k: v for k, v in stored.items() if k in KEYS}
    if not own:
        return base
    candidate = base.replace(**own)
    return base if validate(candidate) else candidate


def summary(config: Config) -> str:
    """One line for the conversation's header: the system prompt's start, the sampler and the
    answer format when it is not free text."""
    prompt = " ".join(config.system_prompt.split())
    prompt = (prompt[:48] + "…") if len(prompt) > 48 else prompt
    sampler = "greedy" if config.temp <= 0 else f"temperature {config.temp:g}"
    parts = [f"System prompt: {prompt}" if prompt else "No system prompt", sampler]
    if config.repeat_penalty != 1.0:
        parts.append(f"repetition penalty {config.repeat_penalty:g}")
    if config.tools.strip():
        parts.append("tools" if config.tool_choice != "required" else "tools (a call required)")
    if config.answer_format != "text":
        parts.append({"json": "JSON answers"}.get(config.answer_format, "answers by a schema"))
    return " · ".join(parts)
