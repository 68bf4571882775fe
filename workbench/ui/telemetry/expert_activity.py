"""The expert activity map's data (Qt-free): decayed routing frequency per (layer, expert).

Each generated token's routings (an `ExpertActivity` from the engine) are folded in as
`recent = recent * decay + routed`, with `decay = 0.5 ** (1 / half_life)`: a routing counts 1 on
its own token and half as much `half_life` tokens later. An expert routed on every token
settles at `1 / (1 - decay)` (about 23.6 for a half-life of 16). Residency is the engine's
latest snapshot of the expert cache. `rgba()` renders both into one image, so the widget only
hands pyqtgraph a ready array.
"""

from __future__ import annotations

import numpy as np

from workbench.engine.requests import ExpertActivity

HALF_LIFE_TOKENS = 16.0
CELL_PX = 3  # image pixels per cell side: the centre pixel carries the residency dot

# White (not routed recently) through yellow and orange to red (the hottest cell).
_STOPS = ((0.0, (255, 255, 255)), (0.25, (255, 236, 160)), (0.6, (251, 140, 0)),
          (1.0, (183, 28, 28)))
DENSE_RGB = (224, 224, 224)  # rows of dense layers: no experts there
RESIDENT_RGB = (13, 71, 161)  # the dot of a cell whose expert is in the cache
TRANSIENT_RGB = (198, 40, 40)  # in the cache only until the next load (the token-cycle guard)
AHEAD_RGB = (46, 125, 50)  # read ahead (warm start or prefetch), not yet looked up
# The top-left pixel of a cell substitution brought in recently (in place of the router's pick).
SUBSTITUTED_RGB = (106, 27, 154)
SUBSTITUTED_MARK = 0.5  # decayed substitutions at which a cell is marked (~a half-life ago)
HOLDS_TEXT = {0: "no", 1: "yes", 2: "yes, transient (the token-cycle guard evicts it first)",
              3: "yes, read ahead (warm start or prefetch), not yet used"}


def _lut() -> np.ndarray:
    """256 RGBA entries along _STOPS (index 0 is white, 255 the hottest colour)."""
    t = np.linspace(0.0, 1.0, 256)
    xs = [s[0] for s in _STOPS]
    out = np.full((256, 4), 255, dtype=np.uint8)
    for channel in range(3):
        out[:, channel] = np.round(np.interp(t, xs, [s[1][channel] for s in _STOPS]))
    return out


LUT = _lut()


class ExpertActivityMap:
    """The accumulated map of one model; `reset()` on a new model."""

    def __init__(self, half_life: float = HALF_LIFE_TOKENS) -> None:
        if half_life <= 0:
            raise ValueError("the half-life must be positive")
        self.half_life = half_life
        self.decay = 0.5 ** (1.0 / half_life)
        self.reset()

    def reset(self, n_layer: int = 0, n_expert: int = 0) -> None:
        self.recent = np.zeros((n_layer, n_expert), dtype=np.float64)
        self.total = np.zeros((n_layer, n_expert), dtype=np.int64)  # routings since the reset
        self.resident = np.zeros((n_layer, n_expert), dtype=bool)
        self.moe_layers = np.zeros(n_layer, dtype=bool)
        self.cached = False
        self.holds: np.ndarray | None = None  # per cell, what the cache holds (ENTRY_* codes)
        self.policy = ""
        # Decayed like `recent`: substitutions into each cell (all 0 while substitution is off).
        self.substituted = np.zeros((n_layer, n_expert), dtype=np.float64)
        self.tokens = 0  # events folded in since the reset
        self.version = 0  # bumps on every change, so a painter knows when to repaint

    @property
    def shape(self) -> tuple[int, int]:
        return self.recent.shape  # type: ignore[return-value]

    @property
    def empty(self) -> bool:
        return self.tokens == 0

    @property
    def steady_max(self) -> float:
        """What an expert routed on every token settles at."""
        return 1.0 / (1.0 - self.decay)

    def add(self, activity: ExpertActivity) -> None:
        """One token: decay everything one step, add its routings, take its residency."""
        if activity.routed.shape != self.recent.shape:
            self.reset(*activity.routed.shape)  # another model (or the first token)
        self.recent *= self.decay
        self.recent += activity.routed
        self.substituted *= self.decay
        if activity.substituted is not None and activity.substituted.shape == self.shape:
            self.substituted += activity.substituted
        self.total += activity.routed
        self.resident = activity.resident
        self.moe_layers = activity.moe_layers
        self.cached = activity.cached
        self.holds = activity.holds
        self.policy = activity.policy
        self.tokens += 1
        self.version += 1

    def hottest(self) -> float:
        return float(self.recent.max()) if self.recent.size else 0.0

    def describe(self, layer: int, expert: int) -> str:
        """The hover text of one cell ("" outside the map)."""
        n_layer, n_expert = self.shape
        if not (0 <= layer < n_layer and 0 <= expert < n_expert):
            return ""
        if not self.moe_layers[layer]:
            return f"layer {layer}: dense (no experts to route)"
        if self.cached and self.holds is not None:
            resident = HOLDS_TEXT.get(int(self.holds[layer, expert]), "yes")
        elif self.cached:
            resident = "yes" if self.resident[layer, expert] else "no"
        else:
            resident = "no (the expert cache is off)"
        text = (f"layer {layer}, expert {expert}: routed {self.recent[layer, expert]:.1f} "
                f"recent, resident {resident}")
        if self.substituted[layer, expert] > 0:
            text += (f"; brought in by substitution {self.substituted[layer, expert]:.1f} recent "
                     "(in place of the router's pick)")
        return text

    @property
    def any_substituted(self) -> bool:
        return bool((self.substituted >= SUBSTITUTED_MARK).any())

    def rgba(self, cell_px: int = CELL_PX) -> np.ndarray:
        """The map as an RGBA image, row-major (n_layer * cell_px, n_expert * cell_px, 4).

        Colour is `recent` relative to the hottest cell (white = not routed recently), dense
        layers are grey, and a resident expert gets a dot in its cell's centre pixel."""
        hot = self.hottest()
        scaled = self.recent / hot if hot > 0 else np.zeros_like(self.recent)
        cells = LUT[np.rint(np.clip(scaled, 0.0, 1.0) * 255).astype(np.intp)]
        cells[~self.moe_layers, :, :3] = DENSE_RGB
        image = np.repeat(np.repeat(cells, cell_px, axis=0), cell_px, axis=1)
        centre = cell_px // 2
        dots = image[centre::cell_px, centre::cell_px]  # a view: one pixel per cell
        dots[self.resident, :3] = RESIDENT_RGB
        if self.holds is not None and self.holds.shape == self.resident.shape:
            dots[self.holds == 2, :3] = TRANSIENT_RGB
            dots[self.holds == 3, :3] = AHEAD_RGB
        if cell_px > 1:  # a corner pixel, beside the residency dot
            corners = image[::cell_px, ::cell_px]
            corners[self.substituted >= SUBSTITUTED_MARK, :3] = SUBSTITUTED_RGB
        return image


def tick_step(n: int, ticks: int = 8) -> int:
    """A whole 1, 2 or 5 x 10^k step giving at most about `ticks` ticks over n rows."""
    step = 1
    while n / step > ticks:
        step = _next_nice(step)
    return step


def _next_nice(step: int) -> int:
    digits = str(step)
    lead, zeros = int(digits[0]), len(digits) - 1
    return (2 if lead == 1 else 5 if lead == 2 else 10) * 10 ** zeros
