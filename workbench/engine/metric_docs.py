"""The reference tables of docs/telemetry.md, generated from the declarations, never hand-kept.

docs/telemetry.md is mostly prose (the layout, the preamble, how to read upstream files), which
stays hand-written in the Markdown file. Only its tables of per-token columns
(metric_columns.SPECS) and summary keys (summary_keys.KEYS) are generated: each sits between a
``<!-- BEGIN GENERATED name ... -->`` and an ``<!-- END GENERATED name -->`` line, and
`render` replaces what is between them. A test fails when the committed file differs from
`render` of itself. After changing a declaration:

    python -m workbench.engine.metric_docs --write     (or --check: exit 1 when stale)
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from workbench.atomic_write import write_text_atomic
from workbench.engine.metric_columns import SPECS, Column, Source
from workbench.engine.summary_keys import KEYS, LEFT_OUT_UPSTREAM

DOCS = Path(__file__).resolve().parents[2] / "docs" / "telemetry.md"
DOCS_COMMAND = "python -m workbench.engine.metric_docs --write"

# What the docs' "filled" column says for each source (metric_columns.Source).
FILLED: dict[Source, str] = {
    "loop": "always", "probe": "always", "streamer": "streaming", "absent": "-1",
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def _name(name: str, upstream: bool) -> str:
    return f"`{name}`" if upstream else f"`{name}` (ours)"


def _fmt(fmt: str) -> str:
    return f"`{fmt}`" if fmt else "text"


def _filled(c: Column) -> str:
    return f"{FILLED[c.source]} ({c.note})" if c.note else FILLED[c.source]


def columns_markdown() -> str:
    """The per-token column table, with the legend of its "filled" column."""
    lines = [
        '"Filled" says when this engine fills a column: **always** (every token; -1 only where '
        "the platform cannot report the figure), **streaming** (with `--moe-stream`; -1 "
        "otherwise), or **-1** (a feature this engine does not have).",
        "",
        _row(["column", "unit", "format", "definition", "filled"]),
        "|---|---|---|---|---|",
    ]
    lines += [_row([_name(c.name, c.upstream), c.unit, _fmt(c.fmt), c.doc, _filled(c)])
              for c in SPECS if c.in_file]
    record_only = "; ".join(f"`{c.name}`, {c.doc}" for c in SPECS if not c.in_file)
    lines += ["", "`TokenMetrics` also holds fields that are not written per row (they would make "
              f"the file quadratic in the answer length): {record_only}."]
    return "\n".join(lines)


def summary_markdown() -> str:
    """The summary key table, and the upstream keys left out."""
    lines = [_row(["key", "format", "from `RunSummary`", "meaning"]), "|---|---|---|---|"]
    lines += [_row([_name(k.key, k.upstream), _fmt(k.fmt), f"`{k.source}`", k.doc]) for k in KEYS]
    left_out = " ".join(LEFT_OUT_UPSTREAM)
    lines += ["", "Upstream keys for features this engine lacks are left out rather than written "
              f"as fake zeros: `{left_out}`. Upstream files may have all of them; the reader "
              "keeps every key."]
    return "\n".join(lines)


# Block name -> (the module it is generated from, the generator).
BLOCKS: dict[str, tuple[str, Callable[[], str]]] = {
    "columns": ("workbench/engine/metric_columns.py", columns_markdown),
    "summary": ("workbench/engine/summary_keys.py", summary_markdown),
}
_BLOCK = re.compile(r"^<!-- BEGIN GENERATED (\w+)\b.*?-->\n.*?^<!-- END GENERATED \1 -->$",
                    re.MULTILINE | re.DOTALL)


def _block(name: str) -> str:
    source, generate = BLOCKS[name]
    begin = (f"<!-- BEGIN GENERATED {name} from {source} by `{DOCS_COMMAND}`; "
             "edit the declarations, not this table -->")
    return f"{begin}\n{generate()}\n<!-- END GENERATED {name} -->"


def render(text: str) -> str:
    """`text` (docs/telemetry.md) with every generated block brought up to date."""
    found: list[str] = []

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in BLOCKS:
            raise ValueError(f"docs/telemetry.md has an unknown generated block {name!r}")
        found.append(name)
        return _block(name)

    out = _BLOCK.sub(replace, text)
    if sorted(found) != sorted(BLOCKS):
        raise ValueError(f"docs/telemetry.md needs each generated block once: found {found}, "
                         f"want {sorted(BLOCKS)}")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbench.engine.metric_docs",
                                     description="Regenerate the tables of docs/telemetry.md.")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite docs/telemetry.md in place")
    mode.add_argument("--check", action="store_true", help="exit 1 if docs/telemetry.md is stale")
    args = parser.parse_args(argv)
    committed = DOCS.read_text(encoding="utf-8")
    current = render(committed)
    if args.write:
        if current != committed:
            write_text_atomic(DOCS, current)
        return 0
    if args.check:
        if current != committed:
            print(f"{DOCS} is stale; run: {DOCS_COMMAND}", file=sys.stderr)
            return 1
        return 0
    sys.stdout.write(current)
    return 0


if __name__ == "__main__":
    sys.exit(main())
