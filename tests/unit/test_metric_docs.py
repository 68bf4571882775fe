"""docs/telemetry.md: its column and summary tables are generated from the declarations."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.engine import metric_docs
from workbench.engine.metric_columns import SPECS
from workbench.engine.summary_keys import KEYS

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs" / "telemetry.md"


def test_docs_are_current() -> None:
    committed = DOCS.read_text(encoding="utf-8")
    assert committed == metric_docs.render(committed), (
        f"docs/telemetry.md is stale; run: {metric_docs.DOCS_COMMAND}")


def test_the_generator_edits_the_repository_docs() -> None:
    assert metric_docs.DOCS == DOCS
    assert metric_docs.main(["--check"]) == 0


def test_docs_have_one_row_per_column_and_key() -> None:
    text = DOCS.read_text(encoding="utf-8")
    for c in SPECS:
        row = f"| `{c.name}`{'' if c.upstream else ' (ours)'} | {c.unit} |"
        assert (row in text) == c.in_file, c.name
    for k in KEYS:
        assert f"| `{k.key}`{'' if k.upstream else ' (ours)'} | " in text, k.key


def test_render_replaces_only_the_blocks() -> None:
    stale = ("# Title\n\nprose\n<!-- BEGIN GENERATED columns old -->\nstale\n"
             "<!-- END GENERATED columns -->\nmore prose\n"
             "<!-- BEGIN GENERATED summary -->\n<!-- END GENERATED summary -->\n")
    out = metric_docs.render(stale)
    assert out.startswith("# Title\n\nprose\n<!-- BEGIN GENERATED columns from ")
    assert "stale" not in out and "\nmore prose\n" in out and out.endswith("summary -->\n")
    assert metric_docs.columns_markdown() in out and metric_docs.summary_markdown() in out
    assert metric_docs.render(out) == out


@pytest.mark.parametrize("text", [
    "no blocks at all\n",
    "<!-- BEGIN GENERATED columns -->\n<!-- END GENERATED columns -->\n",
    "<!-- BEGIN GENERATED columns -->\n<!-- END GENERATED columns -->\n"
    "<!-- BEGIN GENERATED summary -->\n<!-- END GENERATED summary -->\n"
    "<!-- BEGIN GENERATED other -->\n<!-- END GENERATED other -->\n",
])
def test_render_wants_each_block_once(text: str) -> None:
    with pytest.raises(ValueError, match="generated block"):
        metric_docs.render(text)
