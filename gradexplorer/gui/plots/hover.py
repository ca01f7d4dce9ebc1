"""Value readout on hover: a rate-limited mouse tracker for pyqtgraph plots."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
import shiboken6
from PySide6.QtWidgets import QLabel, QSizePolicy

HOVER_RATE = 30  # readouts per second at most (pyqtgraph SignalProxy rateLimit)


class HoverReadout:
    """Calls ``show(text)`` with ``describe(plot, x, y)`` for the plot under the mouse (x, y in
    the plot's view coordinates), or with "" when the mouse leaves every plot."""

    def __init__(self, scene, plots: list[pg.PlotItem],
                 describe: Callable[[pg.PlotItem, float, float], str],
                 show: Callable[[str], None]) -> None:
        self.plots, self.describe, self.show = plots, describe, show
        self.proxy = pg.SignalProxy(scene.sigMouseMoved, rateLimit=HOVER_RATE, slot=self.moved)

    def moved(self, event) -> None:
        """The proxy's slot: ``event`` is ``(scene position,)``. Nothing once a plot is gone:
        the proxy's rate limit holds the last move back, and its window may close meanwhile."""
        if not all(plot.vb is not None and shiboken6.isValid(plot.vb) for plot in self.plots):
            return  # (pyqtgraph's close() sets ``vb`` to None; Qt may have deleted it first)
        pos = event[0]
        for plot in self.plots:
            if plot.vb.sceneBoundingRect().contains(pos):
                point = plot.vb.mapSceneToView(pos)
                self.show(self.describe(plot, point.x(), point.y()))
                return
        self.show("")


class ReadoutLabel(QLabel):
    """A one-line text in a place of its own: however long the text, the label asks for no
    width (its layout gave it its room), so that nothing around it moves as the mouse does (a
    readout that asked for its text's width widened the Training dock, and the Model dock beside
    it shrank from 290 to 175 pixels under the pointer); cut on the right, whole in its tooltip."""

    def __init__(self, text: str = "") -> None:
        super().__init__("")
        self.setIndent(4)
        self.setMinimumWidth(1)
        self.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Fixed)
        self.setFixedHeight(self.fontMetrics().height() + 4)  # empty or not: the same height
        self.setText(text)

    def setText(self, text: str) -> None:  # noqa: N802 - Qt API
        super().setText(text)
        self.setToolTip(text)


def corner_readout(widget: pg.PlotWidget) -> tuple[pg.TextItem, Callable[[str], None]]:
    """A text in ``widget``'s top-left corner, above the data and outside its range, and the
    function that writes it (the ``show`` of a ``HoverReadout``): the theme's ink on a box of
    the plot's background, readable over any image (it was grey on the heat map's purple, and
    kept the first theme's colours after a switch), wrapped to the plot area's width."""
    from gradexplorer.gui.theme import PLOT_COLOURS, current_theme

    item = pg.TextItem("", anchor=(0, 0))
    item.setZValue(11)
    widget.addItem(item, ignoreBounds=True)

    def show(text: str) -> None:
        background, ink = PLOT_COLOURS[current_theme()]
        box = pg.mkColor(background)
        box.setAlpha(225)
        item.fill = pg.mkBrush(box)
        item.setColor(ink)
        item.setText(text)
        if text:  # wrapped to the plot area's width: never under the colour bar, never past
            vb = widget.plotItem.vb  # the plot's edge (the heat map's ran under its bar)
            width = max(40.0, vb.width() - 4)
            if item.textItem.textWidth() != width:
                item.setTextWidth(width)
            (x0, _x1), (_y0, y1) = vb.viewRange()
            item.setPos(x0, y1)

    return item, show


def nearest_point(x: np.ndarray, y: np.ndarray, at: float) -> int | None:
    """Index of the finite point whose x is nearest ``at`` (None when there is none)."""
    finite = np.flatnonzero(np.isfinite(y))
    if not finite.size:
        return None
    return int(finite[np.argmin(np.abs(x[finite] - at))])
