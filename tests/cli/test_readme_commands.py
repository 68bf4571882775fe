"""The README's command table lists every command the CLI has (a new one is documented)."""

from __future__ import annotations

import re
from pathlib import Path

from workbench.cli.main import build_parser

README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_command_is_in_the_readme_table():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    commands = set(sub.choices)
    rows = re.findall(r"^\| `([a-z-]+)", README.read_text(), flags=re.MULTILINE)
    missing = sorted(commands - set(rows))
    assert not missing, f"README's command table lacks {missing}"
    assert {"explain", "conversations", "runs", "advise"} <= set(rows)
