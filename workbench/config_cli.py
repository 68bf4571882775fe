"""The text views of the config tree: CLI flags and docs/settings.md, generated, never hand-kept.

Every flag defaults to `argparse.SUPPRESS`, so a flag the user did not type leaves no attribute
on the namespace and `config_from_args` changes only what was typed. That lets a preset (or the
settings the window last used) be the base and the command line a set of overrides on it.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

from workbench.config import (
    GROUPS,
    PY_TYPES,
    SETTINGS,
    Config,
    ConfigError,
    Setting,
    format_value,
    range_text,
    requires_text,
    specials_text,
)

DOCS_COMMAND = "python -m workbench.config_cli > docs/settings.md"


def add_arguments(parser: argparse.ArgumentParser, groups: Iterable[str] | None = None) -> None:
    """Add the flags of every setting (or only those of the named groups), one section a group."""
    wanted = None if groups is None else set(groups)
    unknown = (wanted or set()) - {g.name for g in GROUPS}
    if unknown:
        raise ConfigError(f"unknown settings group(s): {', '.join(sorted(unknown))}; "
                          f"known: {', '.join(g.name for g in GROUPS)}")
    for group in GROUPS:
        if wanted is not None and group.name not in wanted:
            continue
        section = parser.add_argument_group(f"{group.name.lower()} settings", group.blurb)
        for s in SETTINGS:
            if s.group == group.name:
                _add_flag(section, s)


def _help(s: Setting) -> str:
    notes = [specials_text(s, skip=s.default), f"default: {format_value(s, s.default, unit=True)}",
             f"only used when {requires_text(s)}" if s.requires or s.gate else ""]
    text = f"{s.help} ({'; '.join(n for n in notes if n)})"
    return text.replace("%", "%%")  # argparse %-formats help strings


def _add_flag(section: argparse._ArgumentGroup, s: Setting) -> None:
    if s.type == "bool":
        section.add_argument(*s.flags, dest=s.name, action=argparse.BooleanOptionalAction,
                             default=argparse.SUPPRESS, help=_help(s))
        for alias in s.false_aliases:
            section.add_argument(alias, dest=s.name, action="store_false",
                                 default=argparse.SUPPRESS, help=f"same as --no-{s.flag[2:]}")
        return
    kwargs: dict[str, Any] = {"dest": s.name, "type": PY_TYPES[s.type],
                              "default": argparse.SUPPRESS, "help": _help(s)}
    if s.type == "choice":
        kwargs["choices"] = s.choices
    else:
        kwargs["metavar"] = s.metavar or {"int": "N", "float": "X"}.get(s.type, "TEXT")
    section.add_argument(*s.flags, **kwargs)


def typed_settings(ns: argparse.Namespace) -> dict[str, Any]:
    """The settings the user actually typed, by name (what engine/opening.py lays on top)."""
    return {s.name: getattr(ns, s.name) for s in SETTINGS if hasattr(ns, s.name)}


def config_from_args(ns: argparse.Namespace, base: Config | None = None) -> Config:
    """`base` (defaults when None) with only the flags the user actually typed applied."""
    return (base if base is not None else Config()).replace(**typed_settings(ns))


def settings_markdown() -> str:
    """docs/settings.md, generated; a test fails when the committed file differs."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = [
        f"<!-- Generated from workbench/config.py by `{DOCS_COMMAND}`; do not edit. -->",
        "# Settings", "",
        "Every setting of the workbench, one table per group. **Scope** says when a change "
        "takes effect: `load` settings are fixed when the model is opened, so changing one "
        "reopens the model; `request` settings apply from the next reply. A setting with a "
        "**Requires** condition is ignored (and disabled in the settings panel) while the "
        "condition does not hold.", "",
        "The defaults below are every model's, with one exception: the bundled chat model "
        "(SmolLM2-135M-Instruct) opens with a short system prompt and a repetition penalty of "
        "1.1 over them, still greedy (`workbench/engine/model_defaults.py`; why, and how "
        "Regenerate behaves, in docs/chat.md, \"Chat defaults of the bundled model\"). What a "
        "model opens with (these defaults, the model's own, what the window remembers, the "
        "flags typed) is decided in one place, `workbench/engine/opening.py` "
        "(docs/architecture.md, \"What a model opens with\").",
    ]
    for group in GROUPS:
        lines += ["", f"## {group.name}", "", f"{group.blurb}.", "",
                  "| Setting | Flags | Default | Unit | Range | Scope | Help | Requires |",
                  "|---|---|---|---|---|---|---|---|"]
        for s in (s for s in SETTINGS if s.group == group.name):
            negated = [f"--no-{f[2:]}" for f in s.flags if s.type == "bool" and f[:2] == "--"]
            flags = [*s.flags, *negated, *s.false_aliases]
            default = s.doc_default or format_value(s, s.default)
            specials = specials_text(s, skip=s.default)
            help_cell = f"{s.help} ({specials})" if specials else s.help
            row = [f"{s.label} (`{s.name}`)", ", ".join(f"`{f}`" for f in flags), default,
                   s.unit or "", range_text(s), s.scope, help_cell, requires_text(s)]
            lines.append("| " + " | ".join(cell(c) for c in row) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(settings_markdown(), end="")
