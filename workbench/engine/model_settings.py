"""A model's own load-time settings: remembered from the last time it was open, or defaults
fitted to it and this machine, never those chosen for another model. engine/opening.py lays
them over the other layers (the one place that decides what a model opens with).

A 256-token context picked for a synthetic model, streaming turned on for a big MoE or a drop
fraction set for an experiment belong to that model: opening another starts from what suits
the other. Per-request settings (sampling, the system prompt, tokens to generate) stay the
window's, except that the reply is shortened when it would not fit the context (validate()
refuses `n_predict >= n_ctx`), and the note says so.

One small JSON file in the data directory (`model_settings.json`): {model path: {setting:
value}} for the load-scope settings, written whole or not at all (atomic_write). A missing or
damaged file remembers nothing; an entry that no longer validates is ignored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from workbench.atomic_write import write_text_atomic
from workbench.config import (
    BY_NAME,
    SETTINGS,
    Config,
    fmt_number,
    follow_app_defaults,
)
from workbench.file_kind import read_text
from workbench.moe.layout import ModelFacts
from workbench.moe.memory_estimate import estimate_memory

FILE_NAME = "model_settings.json"
# What a model remembers: the load-scope settings but the file itself (the key) and its
# projector (found beside the file each time).
LOAD_KEYS: tuple[str, ...] = tuple(s.name for s in SETTINGS
                                   if s.scope == "load" and s.name not in ("model", "mmproj"))
MIN_FITTED_CTX = 512  # tokens: below this a fitted context is not worth halving further
MEMORY_SHARE = 0.8  # of the memory available now, what a model's estimate may take


def settings_file(data: Path) -> Path:
    return data / FILE_NAME


def load_remembered(data: Path) -> dict[str, dict[str, Any]]:
    try:
        raw = json.loads(read_text(settings_file(data)))
    except (OSError, ValueError):
        return {}
    if not isinstance(raw, dict):
        return {}
    return {k: v for k, v in raw.items() if isinstance(k, str) and isinstance(v, dict)}


def with_model(remembered: Mapping[str, dict[str, Any]], config: Config, *,
               threads_chosen: bool = True) -> dict[str, dict[str, Any]]:
    """`remembered` with `config`'s load-time settings kept for its model. A thread count the
    user did not choose (`threads_chosen` False: measured at open, or the default) is left
    out, so the next opening decides it again (engine/opening.py); one in the entry is a
    choice, and wins."""
    keys = [k for k in LOAD_KEYS if threads_chosen or k != "n_threads"]
    return {**remembered, config.model: {k: getattr(config, k) for k in keys}}


def save_remembered(data: Path, remembered: Mapping[str, dict[str, Any]]) -> None:
    """Raises OutputFileError when it cannot be written (the earlier file stays whole)."""
    data.mkdir(parents=True, exist_ok=True)  # the data directory is ours to create
    write_text_atomic(settings_file(data), json.dumps(dict(remembered), indent=1,
                                                      sort_keys=True))


def fit_reply(config: Config) -> tuple[Config, str]:
    """`config` with a reply that fits its context (half of it, when tokens to generate would
    leave no room for the prompt), and the sentence that says so ("" when it fitted)."""
    if config.n_predict < config.n_ctx:
        return config, ""
    n_predict = max(1, config.n_ctx // 2)
    return config.replace(n_predict=n_predict), (
        f"Tokens to generate lowered from {config.n_predict} to {n_predict} to fit the "
        f"{config.n_ctx}-token context.")


def fitted(model: str, facts: ModelFacts | None, base: Config, available_mib: float = -1.0
           ) -> tuple[Config, str]:
    """`base` with the default load-time settings fitted to `model`'s size (`facts`; None:
    unknown) and to `available_mib` (-1: unknown) of memory, and what they were fitted to
    ("its trained context", "" when nothing changed)."""
    defaults = Config()
    config = base.replace(model=model, **{k: getattr(defaults, k) for k in LOAD_KEYS})
    if facts is None:
        return config, ""
    why: list[str] = []
    n_ctx = config.n_ctx
    if facts.n_ctx_train > 0 and n_ctx > facts.n_ctx_train:
        n_ctx = facts.n_ctx_train
        why.append("its trained context")
    if available_mib > 0:
        budget = available_mib * MEMORY_SHARE
        estimate = estimate_memory(facts, n_ctx, available_mib)
        resident = estimate.weights_mib
        if facts.expert_bytes > 0 and resident > budget:
            # A MoE larger than memory runs by reading its experts from disk as tokens use
            # them; what stays resident is its dense part (and the cache, sized to fit).
            # As the settings panel would: the window's defaults follow the streaming that was
            # turned on (dropping at 75 % once a cache is on: Setting.app_default).
            config = follow_app_defaults(config, config.replace(moe_stream=True,
                                                                cache_auto=True))
            resident -= estimate.expert_mib
            why.append("this machine's memory")
        room = budget - resident  # for the KV cache: a smaller context is what frees it
        halved = n_ctx
        while (room > 0 and halved > MIN_FITTED_CTX
               and estimate_memory(facts, halved, available_mib).kv_max_mib > room):
            halved //= 2
        if halved != n_ctx:
            n_ctx = halved
            if "this machine's memory" not in why:
                why.append("this machine's memory")
    config = config.replace(n_ctx=n_ctx)
    return config, " and ".join(why)


def describe(config: Config) -> str:
    """The load-time settings a user would want to see before loading, in words."""
    parts = [f"context {fmt_number(config.n_ctx)} tokens",
             f"{config.n_threads} thread{'s' if config.n_threads != 1 else ''}"]
    if config.moe_stream:
        cache = ("cache sized automatically" if config.cache_auto
                 else f"cache {config.cache_mb} {BY_NAME['cache_mb'].unit}" if config.cache_mb
                 else "no cache")
        parts.append(f"expert streaming on ({cache})")
    else:
        parts.append("expert streaming off")
    if config.drop_cold_frac > 0:
        parts.append(f"dropping {config.drop_cold_frac:.0%} of cold experts")
    if config.n_expert_used > 0:
        parts.append(f"{config.n_expert_used} active experts")
    return ", ".join(parts)
