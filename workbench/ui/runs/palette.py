"""Run colours: distinguishable on either theme's plot background; the same run keeps its
colour across the views."""

from __future__ import annotations

COLOURS: tuple[str, ...] = (
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#7f7f7f", "#bcbd22",
)


def colour(i: int) -> str:
    return COLOURS[i % len(COLOURS)]
