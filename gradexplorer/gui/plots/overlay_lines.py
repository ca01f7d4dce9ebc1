"""Several runs' curves in one plot: one line per run in its colour, a legend, one shared range,
and the x axis as steps, seconds or dates (``RunOverlay.x_mode``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt

from gradexplorer.gui.plots.axes import padded_range
from gradexplorer.gui.plots.legend_row import KeySlot, LegendRow


@dataclass(frozen=True)
class Line:
    """One run's curve: its legend name, colour, points, and whether it is the reference run."""

    name: str
    colour: str
    x: np.ndarray
    y: np.ndarray
    reference: bool = False


class OverlayLines:
    """The extra runs' lines of ``plot`` (the plot's own items are left alone), kept in a pool
    of PlotDataItems re-fed with ``setData``; with ``legend`` (a ``LegendRow`` its owner places
    outside the plot, or its slot in a ``SharedKey``) every line shown is named
    (``legend_extra``: lines drawn by the plot's owner, named first)."""

    def __init__(self, plot: pg.PlotItem, legend: LegendRow | KeySlot | None = None) -> None:
        self.plot = plot
        self.items: list[pg.PlotDataItem] = []
        self.legend = legend
        self._named: tuple = ()

    def show(self, lines: Sequence[Line], legend_extra: Sequence[tuple[pg.PlotDataItem, str]] = (),
             named: bool = True) -> None:
        """Draw ``lines`` (hiding the pool's other items) and name them in the legend (hidden
        when not ``named``)."""
        while len(self.items) < len(lines):
            item = pg.PlotDataItem()
            item.setDownsampling(auto=True, method="peak")
            item.setClipToView(True)
            self.plot.addItem(item)
            self.items.append(item)
        for item, line in zip(self.items, lines, strict=False):
            item.setPen(pg.mkPen(line.colour, width=2.2 if line.reference else 1.4))
            item.setZValue(2 if line.reference else 1)
            item.setData(line.x, line.y, connect="finite")
            item.setVisible(True)
        for item in self.items[len(lines):]:
            item.setData([], [])
            item.setVisible(False)
        if self.legend is not None and not named:
            self._named = ()
            self.legend.show_entries([])
        elif self.legend is not None:
            self._name(list(legend_extra) + [(i, ln.name) for i, ln in zip(self.items, lines, strict=False)])

    def _name(self, named: list[tuple[pg.PlotDataItem, str]]) -> None:
        key = tuple((id(i), n, i.opts["pen"].color().name()) for i, n in named)
        if key == self._named:  # a legend rebuilt only when its lines change
            return
        self._named = key
        self.legend.show_entries([(name, item.opts["pen"].color().name(),
                                   item.opts["pen"].style() != Qt.SolidLine) for item, name in named])

    def names(self) -> list[str]:
        """The names the legend shows now (tests)."""
        return [] if self.legend is None else self.legend.names()


def set_x_axis(plot: pg.PlotItem, mode: str, label: str) -> None:
    """Dates on the bottom axis for ``wall time``, numbers otherwise (only a change swaps it)."""
    wall = mode == "wall time"
    axis = plot.getAxis("bottom")
    if wall != isinstance(axis, pg.DateAxisItem):
        plot.setAxisItems({"bottom": pg.DateAxisItem(orientation="bottom") if wall
                           else pg.AxisItem(orientation="bottom")})
    plot.setLabel("bottom", label)


def shared_range(plot: pg.PlotItem, xs: Sequence[np.ndarray], ys: Sequence[np.ndarray],
                 log: bool = False, wall: bool = False) -> None:
    """One x and y range covering every line: x every step drawn (a NaN value too: its step
    still holds a marker), y the finite values (and, for log, those above 0)."""
    from gradexplorer.gui.plots.curves import nice_ceiling  # (curves draws through this module)

    xs = [np.asarray(x, float) for x in xs]
    ys = [np.asarray(y, float) for y in ys]
    x = np.concatenate([a[np.isfinite(a)] for a in xs]) if xs else np.zeros(0)
    y = np.concatenate([b[np.isfinite(a) & np.isfinite(b) & ((b > 0) if log else True)]
                        for a, b in zip(xs, ys, strict=True)]) if ys else np.zeros(0)
    if not len(y):
        return
    y = np.log10(y) if log else y
    x0, x1 = float(x.min()), float(x.max())
    right = x1 + max((x1 - x0) * 0.02, 1.0) if wall else nice_ceiling(x1 + 0.5)
    plot.vb.setRange(xRange=(x0, right), yRange=padded_range(float(y.min()), float(y.max()), log),
                     padding=0, update=True)
