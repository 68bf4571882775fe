"""What a bench matrix runs besides its presets: the rules its arms' names follow, and its
prompt set.

Each arm is a preset (workbench/presets.py); its name names the arm's run files, so it must be
safe in a file name and differ from every other arm's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from workbench.file_kind import read_text
from workbench.paths import resources_dir
from workbench.presets import Preset

DEFAULT_PROMPTS = resources_dir() / "prompts" / "default.txt"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")  # an arm's name is also part of a file name


class ArmError(ValueError):
    """Arms or a prompt set the matrix cannot run; the message says what to fix."""


def check_arms(presets: Sequence[Preset]) -> None:
    """Every arm's name usable in a file name, no name twice, at least one arm."""
    for preset in presets:
        if not _NAME.match(preset.name):
            raise ArmError(f"preset name {preset.name!r}: use letters, digits, '.', '_' or '-' "
                           "(it names the run files), starting with a letter or digit")
    names = [p.name for p in presets]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ArmError(f"preset names must differ: {', '.join(twice)} given more than once")
    if not presets:
        raise ArmError("no presets: give --preset NAME=key=value,... or --preset-file FILE")


def read_prompts(path: str | Path = DEFAULT_PROMPTS) -> list[str]:
    """One prompt per line; blank lines and lines starting with '#' are skipped."""
    lines = read_text(path, "a prompt file").splitlines()
    prompts = [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    if not prompts:
        raise ArmError(f"{path}: no prompts (one a line)")
    return prompts
