"""A plot of the runs views that follows the theme: background, axes, title and legend take the
colours of the palette in force when it is built and again on every theme change (issue 39: the
compare plot stayed white under the dark theme, even after a restart, as it was built with a
fixed white background).

It listens for the palette change itself, so every plot of this kind follows a switch without
the window knowing it exists.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QEvent
from PySide6.QtWidgets import QWidget

from workbench.ui.qt_theme import PlotColours, plot_colours

_THEME_EVENTS = frozenset({QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange,
                           QEvent.Type.StyleChange})


class QtThemedPlot(pg.PlotWidget):
    def __init__(self, parent: QWidget | None = None,
                 view_box: pg.ViewBox | None = None) -> None:
        colours = plot_colours()
        super().__init__(parent, background=colours.background, viewBox=view_box)
        self.colours = colours
        self.legend = self.addLegend(offset=(5, 5), labelTextSize="8pt",
                                     labelTextColor=colours.foreground,
                                     brush=pg.mkBrush(*colours.legend))
        self.set_colours(colours)

    def set_colours(self, colours: PlotColours) -> None:
        self.colours = colours
        self.setBackground(colours.background)
        item = self.getPlotItem()
        for side in ("left", "bottom"):
            axis = item.getAxis(side)
            axis.setPen(colours.foreground)
            axis.setTextPen(colours.foreground)
        item.titleLabel.setText(item.titleLabel.text, size="9pt", color=colours.foreground)
        self.legend.setBrush(pg.mkBrush(*colours.legend))
        self.legend.setLabelTextColor(colours.foreground)  # for entries added later
        for _, label in self.legend.items:  # and those shown already
            label.setText(label.text, color=colours.foreground)

    def set_title(self, text: str) -> None:
        self.setTitle(text, size="9pt", color=self.colours.foreground)

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        # (Qt sends some of these while the view is built, before it has its colours.)
        if (event.type() in _THEME_EVENTS and hasattr(self, "legend")
                and plot_colours() != self.colours):
            self.set_colours(plot_colours())
