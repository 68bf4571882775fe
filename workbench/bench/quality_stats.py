"""What a setting costs in quality, from per-position series (pure numpy; docs/quality.md).

Per scored position the scorer keeps, for the setting and for the lossless reference: the
negative log-probability of the true next token, the argmax, and the KL divergence
KL(reference || setting) of the two next-token distributions over the whole vocabulary. This
module turns those series into figures with intervals. Neighbouring positions of a text are not
independent (a hard passage is hard for many tokens), so every interval is the moving-block
bootstrap of bench/stats.py, as for per-token times.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.bench.stats import Interval, moving_block_bootstrap, percentile_stat


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Log-probabilities (float64) from one row of logits."""
    x = np.asarray(logits, dtype=np.float64)
    shifted = x - x.max()
    return shifted - np.log(np.exp(shifted).sum())


def kl_divergence(reference_logp: np.ndarray, setting_logp: np.ndarray) -> float:
    """KL(reference || setting) in nats: what the setting loses where the reference puts mass.
    Exactly 0 when the two rows are identical (every term is p * 0)."""
    return float(np.sum(np.exp(reference_logp) * (reference_logp - setting_logp)))


@dataclass(slots=True)
class PositionSeries:
    """One comparison's per-position series, in text order (equal lengths)."""

    target: np.ndarray  # the true next token
    nll_setting: np.ndarray  # -log p_setting(target), nats
    nll_reference: np.ndarray
    kl: np.ndarray  # KL(reference || setting), nats
    argmax_setting: np.ndarray
    argmax_reference: np.ndarray

    @property
    def n(self) -> int:
        return int(self.target.size)

    @property
    def flipped(self) -> np.ndarray:
        """Positions where the setting's likeliest token is not the reference's."""
        return self.argmax_setting != self.argmax_reference


class SeriesBuilder:
    """Collects a comparison position by position (the setting's run feeds it)."""

    def __init__(self) -> None:
        self._rows: list[tuple[int, float, float, float, int, int]] = []

    def add(self, target: int, reference_logp: np.ndarray, setting_logp: np.ndarray) -> float:
        """Adds one position; returns its KL."""
        kl = kl_divergence(reference_logp, setting_logp)
        self._rows.append((target, -float(setting_logp[target]), -float(reference_logp[target]),
                           kl, int(np.argmax(setting_logp)), int(np.argmax(reference_logp))))
        return kl

    def build(self) -> PositionSeries:
        cols = list(zip(*self._rows, strict=True)) if self._rows else [()] * 6
        return PositionSeries(
            target=np.asarray(cols[0], dtype=np.int64),
            nll_setting=np.asarray(cols[1], dtype=np.float64),
            nll_reference=np.asarray(cols[2], dtype=np.float64),
            kl=np.asarray(cols[3], dtype=np.float64),
            argmax_setting=np.asarray(cols[4], dtype=np.int64),
            argmax_reference=np.asarray(cols[5], dtype=np.int64),
        )


@dataclass(frozen=True, slots=True)
class QualityFigures:
    """The figures of one comparison, each with its 95 % block-bootstrap interval."""

    n_positions: int
    ppl_setting: Interval
    ppl_reference: Interval
    ppl_ratio: Interval  # setting / reference, paired by position: exp(mean(nll_s - nll_r))
    kl_mean: Interval  # nats
    kl_p95: Interval
    kl_max: float
    agreement: Interval  # share of positions whose argmax is the reference's
    flips: int  # positions whose argmax flipped (n_positions * (1 - agreement))
    top1_setting: Interval  # share of positions whose argmax is the true next token
    top1_reference: Interval

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"n_positions": self.n_positions, "flips": self.flips,
                                  "kl_max": self.kl_max}
        for name in ("ppl_setting", "ppl_reference", "ppl_ratio", "kl_mean", "kl_p95",
                     "agreement", "top1_setting", "top1_reference"):
            iv: Interval = getattr(self, name)
            out[name] = [iv.estimate, iv.low, iv.high]
        return out


def _exp(iv: Interval) -> Interval:
    return Interval(float(np.exp(iv.estimate)), float(np.exp(iv.low)), float(np.exp(iv.high)))


def figures(series: PositionSeries, *, resamples: int = 2000, seed: int = 0) -> QualityFigures:
    """The figures of a comparison of at least one position."""
    if series.n == 0:
        raise ValueError("no positions were scored")

    def ci(x: np.ndarray, stat=np.mean) -> Interval:
        return moving_block_bootstrap(x, stat, resamples=resamples, seed=seed)

    agree = (~series.flipped).astype(np.float64)
    return QualityFigures(
        n_positions=series.n,
        ppl_setting=_exp(ci(series.nll_setting)),
        ppl_reference=_exp(ci(series.nll_reference)),
        ppl_ratio=_exp(ci(series.nll_setting - series.nll_reference)),
        kl_mean=ci(series.kl),
        kl_p95=ci(series.kl, percentile_stat(95)),
        kl_max=float(series.kl.max()),
        agreement=ci(agree),
        flips=int(series.flipped.sum()),
        top1_setting=ci((series.argmax_setting == series.target).astype(np.float64)),
        top1_reference=ci((series.argmax_reference == series.target).astype(np.float64)),
    )
