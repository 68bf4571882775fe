"""What the panel shows for a pending config against the applied one (Qt-free).

The panel is a pure function of (current, pending, SETTINGS): which settings are inert and
why, which problems validate() finds (and the engine's check that the answer schema can be
enforced) and under which setting, what changed, and whether
applying must reopen the model (the load-scope signature differs).

A gated setting whose gate fails (dropping while streaming is off) is ignored, not an error:
what Apply puts in force is `without_ignored(pending)`, so the problems, the changes and the
reopen are judged on that, and the row says why its value is not used.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workbench.config import (
    BY_NAME,
    SETTINGS,
    Config,
    format_value,
    gate_reason,
    inactive_reason,
    signature,
    validate,
    warning_text,
    without_ignored,
)
from workbench.engine.answer_format import schema_problems

REOPEN_TEXT = "Apply reopens the model"


@dataclass(frozen=True)
class Evaluation:
    pending: Config
    problems: dict[str, list[str]] = field(default_factory=dict)  # setting -> messages
    inactive: dict[str, str] = field(default_factory=dict)  # setting -> why it is disabled
    changed: tuple[str, ...] = ()  # settings whose pending value differs from the applied one
    reopen: bool = False  # the load-scope signature differs: applying reopens the model
    in_force: Config | None = None  # what Apply applies: pending without its ignored settings
    warnings: dict[str, str] = field(default_factory=dict)  # setting -> its declared warning

    @property
    def can_apply(self) -> bool:
        return not self.problems and bool(self.changed)

    @property
    def problem_count(self) -> int:
        return sum(len(v) for v in self.problems.values())


def evaluate(current: Config, pending: Config) -> Evaluation:
    used = without_ignored(pending)
    problems: dict[str, list[str]] = {}
    for p in [*validate(used), *schema_problems(used)]:
        # A problem names a declared setting; anything else is shown under the first row.
        key = p.setting if p.setting in BY_NAME else SETTINGS[0].name
        problems.setdefault(key, []).append(p.message)
    # A gated row speaks of the value it shows; the settings that depend on it, of what is used.
    inactive = {s.name: why for s in SETTINGS
                if (why := gate_reason(s, pending) if s.gate else inactive_reason(s, used))}
    changed = tuple(s.name for s in SETTINGS
                    if getattr(used, s.name) != getattr(current, s.name))
    warnings = {s.name: text for s in SETTINGS if (text := warning_text(s, used))}
    return Evaluation(pending, problems, inactive, changed,
                      signature(used) != signature(current), used, warnings)


def changes_text(config: Config) -> list[str]:
    """The config as its differences from the defaults, one "Label: value" line each."""
    out = []
    for name, value in config.diff_from_defaults().items():
        s = BY_NAME[name]
        out.append(f"{s.label}: {format_value(s, value, unit=True)}")
    return out
