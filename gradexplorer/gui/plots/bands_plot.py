"""The selected parameter's distribution over the steps, TensorBoard-style: min–max, p5–p95 and
p25–p75 shaded, the median a line, all from the exact histograms (core/stats/bands.py)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QWidget

from gradexplorer.core.stats.bands import distribution_bands
from gradexplorer.core.stats.history import HistogramMatrix
from gradexplorer.gui.plots.histogram_plot import NamedTitle
from gradexplorer.gui.theme import ACCENT, ALARM, steady_axes

SHADES = (("min", "max", 45), ("p5", "p95", 80), ("p25", "p75", 130))


class BandsPlot(NamedTitle, pg.PlotWidget):
    """``show_matrix(name, matrix)`` draws the bands of ``matrix`` (steps × bins)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.plotItem.setTitle("distribution over steps")
        self.plotItem.setLabel("bottom", "step")
        self.plotItem.setLabel("left", "gradient value")
        steady_axes(self.plotItem, steps=True)
        self.edges = {}
        self.fills = []
        self._shown_colour = ACCENT  # the bands' colour now (the window's own run's)
        colour = pg.mkColor(ACCENT)
        for low, high, alpha in SHADES:
            edge = pg.mkPen(colour.red(), colour.green(), colour.blue(), alpha)  # (a pen-less curve
            lo, hi = pg.PlotDataItem(pen=edge), pg.PlotDataItem(pen=edge)  # has no path to fill)
            fill = pg.FillBetweenItem(lo, hi, brush=pg.mkBrush(colour.red(), colour.green(),
                                                               colour.blue(), alpha))
            self.edges[low], self.edges[high] = lo, hi
            self.addItem(lo)
            self.addItem(hi)  # in the plot: the fill draws between them and the range covers them
            self.addItem(fill)
            self.fills.append(fill)
        self.median = self.plot(pen=pg.mkPen(ACCENT, width=2), name="median")
        self.note = pg.TextItem("", anchor=(0.5, 0.5), color=ALARM)
        self.addItem(self.note, ignoreBounds=True)
        self.bands: dict[str, np.ndarray] = {}
        self.steps = np.zeros(0)

    def show_matrix(self, name: str | None, matrix: HistogramMatrix | None,
                    x: np.ndarray | None = None, colour: str = ACCENT) -> None:
        """Bands of ``name``'s histograms (at ``x``, default the steps; in ``colour``), or a note
        when there are none."""
        self._colour(colour)
        if matrix is None or not len(matrix.steps):
            self.bands, self.steps = {}, np.zeros(0)
            for item in (*self.edges.values(), self.median):
                item.setData([], [])
            self.note.setText("select a parameter" if name is None else "no histogram recorded yet")
            self.plotItem.vb.setRange(xRange=(0, 1), yRange=(0, 1), padding=0)  # the note centred
            self.note.setPos(0.5, 0.5)
            return
        if self.note.toPlainText():
            self.note.setText("")
            self.plotItem.vb.enableAutoRange()  # back to following the bands
        self.steps = np.asarray(matrix.steps if x is None else x, dtype=np.float64)
        self.bands = distribution_bands(matrix.edges, matrix.counts)
        ok = np.isfinite(self.bands["min"]) & np.isfinite(self.steps)
        for key, item in self.edges.items():
            item.setData(self.steps[ok], self.bands[key][ok])
        self.median.setData(self.steps[ok], self.bands["median"][ok])
        self.set_named_title("distribution", name)  # shortened to fit; the shades in the tooltip
        self.setToolTip(f"{name}: min–max, p5–p95 and p25–p75 shaded, the median a line")

    def _colour(self, colour: str) -> None:
        """Shades and median in ``colour`` (a run's colour when runs are overlaid)."""
        if self._shown_colour == colour:
            return
        self._shown_colour = colour
        c = pg.mkColor(colour)
        for (low, high, alpha), fill in zip(SHADES, self.fills, strict=True):
            for key in (low, high):
                self.edges[key].setPen(pg.mkPen(c.red(), c.green(), c.blue(), alpha))
            fill.setBrush(pg.mkBrush(c.red(), c.green(), c.blue(), alpha))
        self.median.setPen(pg.mkPen(colour, width=2))
