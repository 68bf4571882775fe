"""The least width a pyqtgraph view needs to show its plots whole.

A plot is at least as wide as its title, but a GraphicsLayoutWidget does not ask for that: a
layout gives it less, and the scene, which cannot shrink below its minimum, is cut off at the
right (a column of plots, or half a title, out of sight). The owner sets this as the view's
minimum width, once, so that a later change (a wider axis) never widens the window.
"""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtCore import Qt


def scene_min_width(graphics: pg.GraphicsLayoutWidget) -> int:
    layout = graphics.ci.layout
    layout.invalidate()  # size hints are cached from before the titles were set
    return math.ceil(graphics.ci.effectiveSizeHint(Qt.SizeHint.MinimumSize).width())
