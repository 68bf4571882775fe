"""`bench matrix --score`: each arm's quality beside its speed, and the Pareto front.

After the speed runs, every arm's settings are scored against their lossless reference on one
text (bench/quality.py: teacher-forced, one token per decode, so the cache, dropping and
substitution act as in generation). The speed is the matrix's own (decode tok/s over the
repeats, with its interval); the quality is the scoring's (perplexity, KL, agreement, each with
its block-bootstrap interval over positions). An arm is on the Pareto front when no other arm is
at least as fast with at most its KL and strictly better in one of the two. The table is printed
and written (quality.txt, quality.json) with a plot of speed against KL (pareto.svg), the front
highlighted.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from workbench.atomic_write import write_text_atomic
from workbench.bench.compare import CompareTable, format_interval
from workbench.bench.quality import QualityReport, read_text, score_text
from workbench.bench.stats import Interval
from workbench.config import Config

# Positions scored per arm by default: enough to separate the rungs' KL on the bench model.
DEFAULT_SCORE_TOKENS = 256


@dataclass(frozen=True, slots=True)
class ArmQuality:
    arm: str
    tok_s: Interval | None  # the matrix's decode rate over the repeats
    report: QualityReport
    pareto: bool  # on the speed/KL front

    @property
    def kl(self) -> float:
        return self.report.figures.kl_mean.estimate

    @property
    def speed(self) -> float:
        return self.tok_s.estimate if self.tok_s is not None else math.nan


def pareto_front(points: dict[str, tuple[float, float]]) -> set[str]:
    """The names whose (speed, KL) no other point dominates (faster or equal with KL lower or
    equal, one of them strictly). Unmeasured points (NaN) are never on it."""
    ok = {n: p for n, p in points.items() if all(math.isfinite(v) for v in p)}

    def dominated(n: str) -> bool:
        s, k = ok[n]
        return any(s2 >= s and k2 <= k and (s2 > s or k2 < k)
                   for m, (s2, k2) in ok.items() if m != n)

    return {n for n in ok if not dominated(n)}


def score_arms(configs: dict[str, Config], text_path: Path, tokens: int,
               log: Callable[[str], None] | None = None) -> dict[str, QualityReport]:
    """Each arm's settings scored on the text (QualityError / SessionError on failure)."""
    text = read_text(text_path)
    out = {}
    for i, (name, config) in enumerate(configs.items(), start=1):
        if log is not None:
            log(f"scoring {i}/{len(configs)}: {name} ({tokens} positions of {text_path.name})")
        out[name] = score_text(config, text, text_name=text_path.name, max_tokens=tokens)
    return out


def arm_qualities(table: CompareTable, reports: dict[str, QualityReport]) -> list[ArmQuality]:
    rate = table.row("tok_s")
    speeds = {arm.label: cell.value for arm, cell in zip(table.arms, rate.cells, strict=True)}
    points = {name: ((speeds.get(name) or Interval(math.nan, math.nan, math.nan)).estimate,
                     report.figures.kl_mean.estimate) for name, report in reports.items()}
    front = pareto_front(points)
    return [ArmQuality(name, speeds.get(name), report, name in front)
            for name, report in reports.items()]


QUALITY_HEADER = ["KL mean nats", "KL p95", "perplexity ratio", "top-1 agree %"]


def quality_cells(report: QualityReport) -> list[str]:
    """A scored arm's QUALITY_HEADER cells, each with its interval."""
    f = report.figures
    agree = Interval(100 * f.agreement.estimate, 100 * f.agreement.low, 100 * f.agreement.high)
    return [format_interval(f.kl_mean), format_interval(f.kl_p95), format_interval(f.ppl_ratio),
            format_interval(agree)]


def grid_lines(grid: list[list[str]]) -> list[str]:
    """Rows of cells as aligned plain-text lines."""
    widths = [max(len(row[i]) for row in grid) for i in range(len(grid[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            for row in grid]


def format_quality(rows: list[ArmQuality]) -> str:
    """The speed-vs-quality table as plain text; * marks the Pareto front."""
    grid = [["arm", "tok/s", *QUALITY_HEADER, "front"]]
    grid += [[r.arm, format_interval(r.tok_s), *quality_cells(r.report), "*" if r.pareto else ""]
             for r in rows]
    lines = grid_lines(grid)
    n = {r.report.n_scored for r in rows}
    text = next(iter(rows)).report.text_name if rows else "?"
    return ("Speed and quality: decode tok/s of the matrix's repeats; KL, perplexity ratio and "
            f"agreement against each arm's lossless reference on {text} "
            f"({'/'.join(map(str, sorted(n)))} positions, one token per decode); 95 % "
            "intervals; * on the Pareto front (no arm is both faster and closer)\n\n"
            + "\n".join(lines) + "\n")


def quality_json(rows: list[ArmQuality]) -> dict[str, object]:
    return {"arms": {r.arm: {"tok_s": None if r.tok_s is None else
                             [r.tok_s.estimate, r.tok_s.low, r.tok_s.high],
                             "pareto": r.pareto, **r.report.to_dict()} for r in rows}}


def pareto_svg(rows: list[ArmQuality], width: int = 640, height: int = 400) -> str:
    """Speed (x) against KL mean (y, lower is better) with the front drawn and its points
    filled; a plain SVG, so the plot needs nothing installed."""
    pts = [r for r in rows if math.isfinite(r.speed) and math.isfinite(r.kl)]
    m = 60
    xs = [r.speed for r in pts] or [0.0, 1.0]
    ys = [r.kl for r in pts] or [0.0, 1.0]
    x0, x1 = min(xs), max(xs)
    y0, y1 = 0.0, max(ys)
    x1 = x1 if x1 > x0 else x0 + 1.0
    y1 = y1 if y1 > y0 else 1.0

    def px(x: float) -> float:
        return m + (x - x0) / (x1 - x0) * (width - 2 * m)

    def py(y: float) -> float:
        return height - m - (y - y0) / (y1 - y0) * (height - 2 * m)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<line x1="{m}" y1="{height - m}" x2="{width - m}" y2="{height - m}" stroke="black"/>',
           f'<line x1="{m}" y1="{m}" x2="{m}" y2="{height - m}" stroke="black"/>',
           f'<text x="{width / 2}" y="{height - 15}" text-anchor="middle">decode tok/s '
           f'({x0:.3g} to {x1:.3g})</text>',
           f'<text x="15" y="{height / 2}" transform="rotate(-90 15 {height / 2})" '
           f'text-anchor="middle">KL mean, nats (0 to {y1:.3g}; lower is better)</text>']
    front = sorted((r for r in pts if r.pareto), key=lambda r: r.speed)
    if len(front) > 1:
        path = " ".join(f"{px(r.speed):.1f},{py(r.kl):.1f}" for r in front)
        out.append(f'<polyline points="{path}" fill="none" stroke="#d62728" stroke-width="2"/>')
    for r in pts:
        fill = "#d62728" if r.pareto else "white"
        out.append(f'<circle cx="{px(r.speed):.1f}" cy="{py(r.kl):.1f}" r="5" fill="{fill}" '
                   f'stroke="#d62728"><title>{html.escape(r.arm)}</title></circle>')
        out.append(f'<text x="{px(r.speed) + 8:.1f}" y="{py(r.kl) - 8:.1f}">'
                   f'{html.escape(r.arm)}{" (front)" if r.pareto else ""}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write_quality(out_dir: Path, rows: list[ArmQuality]) -> str:
    """quality.txt, quality.json and pareto.svg in the matrix's directory; returns the text."""
    text = format_quality(rows)
    write_text_atomic(out_dir / "quality.txt", text)
    write_text_atomic(out_dir / "quality.json", json.dumps(quality_json(rows), indent=2) + "\n")
    write_text_atomic(out_dir / "pareto.svg", pareto_svg(rows))
    return text
