"""The stall explainer over a whole metrics file or stored run: one explanation per answer
(turn), the text `workbench explain` prints, and the same as JSON (Qt-free)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.bench.stalls import (
    SLOW_FACTOR,
    Explanation,
    Prefill,
    explain_answer,
    mean_expert_bytes,
    prefill_of,
)
from workbench.engine.metrics_reader import MetricsFile
from workbench.plain_number import fixed


@dataclass(frozen=True, slots=True)
class TurnExplanation:
    turn: int
    explanation: Explanation


def _turn_of(row: Mapping[str, Any], default: int) -> int:
    turn = row.get("turn")
    return int(turn) if isinstance(turn, int | float) and not isinstance(turn, bool) else default


def split_turns(rows: Sequence[Mapping[str, Any]]) -> list[tuple[int, list[Mapping[str, Any]]]]:
    """Rows grouped by turn, in file order (a file without a turn column is one turn, 0)."""
    out: list[tuple[int, list[Mapping[str, Any]]]] = []
    for row in rows:
        turn = _turn_of(row, 0)
        if not out or out[-1][0] != turn:
            out.append((turn, []))
        out[-1][1].append(row)
    return out


def summary_prefills(summaries: Sequence[Mapping[str, Any]]) -> dict[int, Prefill]:
    """Each turn's prefill from the summary lines: by their `turn` key (ours), else by order
    (upstream's summaries carry no turn; one per turn, in turn order)."""
    out: dict[int, Prefill] = {}
    for i, summary in enumerate(summaries):
        prefill = prefill_of(summary)
        if prefill is not None:
            out[_turn_of(summary, i)] = prefill
    return out


def expert_bytes_of(model: str | Path) -> float:
    """One expert's mean size (all projections, averaged over the MoE layers) in a model file;
    -1 for a dense model. Raises ModelFileError or OSError for a file that cannot be read."""
    from workbench.moe.layout import expert_tensors

    per_layer: dict[int, int] = {}
    for t in expert_tensors(model):
        per_layer[t.layer] = per_layer.get(t.layer, 0) + t.expert_stride
    return mean_expert_bytes(per_layer)


def model_expert_bytes(mf: MetricsFile) -> float:
    """One expert's mean size, from the model file the run names when it is still there (our
    files record its path in wb_settings); -1 when it cannot be known."""
    from workbench.moe.layout import ModelFileError

    path = mf.settings.get("model") if isinstance(mf.settings, dict) else None
    if not isinstance(path, str) or not path or not Path(path).is_file():
        return -1.0
    try:
        return expert_bytes_of(path)
    except (ModelFileError, OSError, ValueError):
        return -1.0


def file_threads(mf: MetricsFile) -> int:
    """The compute threads the run used: the preamble's `threads` (ours and upstream's)."""
    value = mf.preamble.get("threads", "")
    return int(value) if value.isdigit() else -1


def explain_file(mf: MetricsFile, *, factor: float = SLOW_FACTOR,
                 expert_bytes: float | None = None) -> list[TurnExplanation]:
    """Every turn of a metrics file, explained on its own (each answer has its own median)."""
    size = model_expert_bytes(mf) if expert_bytes is None else expert_bytes
    prefills = summary_prefills(mf.summaries)
    threads = file_threads(mf)
    return [TurnExplanation(turn, explain_answer(rows, prefill=prefills.get(turn),
                                                 expert_bytes=size, threads=threads,
                                                 factor=factor))
            for turn, rows in split_turns(mf.rows)]


def format_report(turns: Sequence[TurnExplanation], source: str, factor: float,
                  limit: int | None = None) -> str:
    """The text `workbench explain` prints."""
    lines = [f"{source}: {len(turns)} answer{'s' * (len(turns) != 1)}; a token is slow at "
             f"{factor:g}× its answer's median wall or more"]
    for t in turns:
        e = t.explanation
        if e.median_ms != e.median_ms:  # NaN: nothing measured
            lines.append(f"\nturn {t.turn}: {e.n_tokens} tokens, no decode wall measured")
            continue
        lines.append(f"\nturn {t.turn}: {e.n_tokens} tokens, median {fixed(e.median_ms, '.1f')} "
                     f"ms; {len(e.slow)} slow (≥ {fixed(e.threshold_ms, '.1f')} ms)")
        if not e.slow:
            continue
        counts = ", ".join(f"{key} {n}" for key, n in e.cause_counts().items())
        lines.append(f"  causes: {counts}")
        shown = e.slow if limit is None else e.worst(limit)
        lines += [f"  {s.line(e.median_ms)}" for s in shown]
        if len(shown) < len(e.slow):
            lines.append(f"  … and {len(e.slow) - len(shown)} more (--limit 0 lists all)")
    return "\n".join(lines) + "\n"


def report_json(turns: Sequence[TurnExplanation], source: str, factor: float) -> dict[str, Any]:
    """The same as a JSON document (NaN, for nothing measured, becomes null)."""
    def clean(value: Any) -> Any:
        if isinstance(value, float) and value != value:
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [clean(v) for v in value]
        return value

    return clean({
        "source": source, "factor": factor,
        "turns": [{"turn": t.turn, "n_tokens": t.explanation.n_tokens,
                   "median_ms": t.explanation.median_ms,
                   "threshold_ms": t.explanation.threshold_ms,
                   "causes": t.explanation.cause_counts(),
                   "slow": [dataclasses.asdict(s) | {"token": s.index + 1}
                            for s in t.explanation.slow]}
                  for t in turns],
    })
