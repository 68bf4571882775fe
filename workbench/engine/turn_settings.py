"""A turn's own settings: the request-scope settings of the config tree that act on one turn.

`TurnSettings` is the frozen value a `GenerateRequest` carries (engine/requests.py): the sampling
chain, the tokens to generate, thinking, the system prompt and speculation. It is derived from the
config tree (workbench/config.py): its fields are exactly the request-scope settings less
`SESSION_WIDE` (those act on the session or the window, not on a turn), with the declarations'
types and defaults, and `TurnSettings.of(config)` is the one helper that takes them from a
`Config`. Adding a request-scope setting is one `Setting(...)` entry: nothing to write here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from workbench.config import BY_NAME, PY_TYPES, SETTINGS, Config, Problem, validate

# Request-scope settings that are not a turn's: the conversation memory's budgets belong to the
# session, automatic titles and the token view to the window (which turns the latter into the
# request's `decoding`: ui/chat/token_view.py), and so do a conversation's tools (the window
# turns them into the request's `tools`: ui/chat/tool_turns.py, as the server does an API's).
SESSION_WIDE: tuple[str, ...] = ("auto_title", "token_alternatives", "kv_pool_mb", "kv_disk_mb",
                                 "tools", "tool_choice")
TURN_SETTING_NAMES: tuple[str, ...] = tuple(
    s.name for s in SETTINGS if s.scope == "request" and s.name not in SESSION_WIDE)
# The ones that make up the sampling chain: a change builds a new chain (a new seed sequence).
SAMPLING_NAMES: tuple[str, ...] = tuple(
    n for n in TURN_SETTING_NAMES if BY_NAME[n].group == "Sampling")


# What a turn's record says it ran with (RunSummary.turn_settings, the metrics file's per-turn
# line): all of it but the system prompt and the answer schema, text of any length that the run's
# settings hold once.
RECORDED_PER_TURN: tuple[str, ...] = tuple(n for n in TURN_SETTING_NAMES
                                           if n not in ("system_prompt", "answer_schema"))


class _TurnSettingsMethods:
    """What a `TurnSettings` value can do (its fields are derived below)."""

    __slots__ = ()

    @classmethod
    def of(cls, config: Config) -> TurnSettings:
        """The turn settings `config` holds (its load-scope and session-wide ones left out)."""
        return cls(**{name: getattr(config, name) for name in TURN_SETTING_NAMES})

    def replace(self, **changes: Any) -> TurnSettings:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in TURN_SETTING_NAMES}

    def recorded(self) -> dict[str, Any]:
        """What a turn's record keeps of these settings (RECORDED_PER_TURN)."""
        return {name: getattr(self, name) for name in RECORDED_PER_TURN}

    @property
    def sampling(self) -> tuple[Any, ...]:
        """What keys the sampling chain: equal tuples sample alike (and share one chain)."""
        return tuple(getattr(self, name) for name in SAMPLING_NAMES)

    def on(self, config: Config) -> Config:
        """`config` with these settings in force (for validation and the record of a run)."""
        return config.replace(**self.to_dict())

    def problems(self, config: Config) -> list[Problem]:
        """What is wrong with these settings on a session opened with `config` (types, ranges,
        and the rules that tie them to load-scope settings, e.g. spec draft needs a draft
        model)."""
        return validate(self.on(config))


# The settings one turn runs with; build with `TurnSettings.of(config)` and `replace()`. A frozen
# dataclass whose fields (name, type, default) are the declarations' own, in their order: a new
# request-scope setting in config.py is a field here with nothing to write.
TurnSettings = dataclasses.make_dataclass(
    "TurnSettings",
    [(name, PY_TYPES[BY_NAME[name].type], dataclasses.field(default=BY_NAME[name].default))
     for name in TURN_SETTING_NAMES],
    bases=(_TurnSettingsMethods,), frozen=True, slots=True)
TurnSettings.__module__ = __name__  # make_dataclass's own `module=` needs Python 3.12
