"""Loss and global gradient-norm curves over steps."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QWidget
from superqt.utils import qthrottled

from gradexplorer.gui.models.timeline import TimelineModel
from gradexplorer.gui.theme import PLOT_PENS, steady_axes

REDRAW_MS = 50  # at most 20 redraws a second while steps arrive


class TrainingCurves(pg.GraphicsLayoutWidget):
    """Two x-linked plots side by side; ``refresh`` pushes the timeline's data into the existing items.

    Observes ``timeline.changed`` through its own throttle (``refresh_soon``); long curves are
    drawn peak-downsampled and clipped to the view by pyqtgraph.
    """

    def __init__(self, timeline: TimelineModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.timeline = timeline
        self.refresh_soon = qthrottled(self.refresh, timeout=REDRAW_MS, parent=self)
        timeline.changed.connect(self.refresh_soon)
        self.loss_plot = self.addPlot(row=0, col=0, title="loss")
        self.norm_plot = self.addPlot(row=0, col=1, title="global gradient norm")
        self.norm_plot.setXLink(self.loss_plot)
        self.loss_plot.setLabel("bottom", "step")
        self.norm_plot.setLabel("bottom", "step")
        self.loss_item = self._curve(self.loss_plot, PLOT_PENS["loss"])
        self.norm_item = self._curve(self.norm_plot, PLOT_PENS["norm"])

    @staticmethod
    def _curve(plot: pg.PlotItem, colour: str) -> pg.PlotDataItem:
        plot.showGrid(x=True, y=True, alpha=0.2)
        plot.disableAutoRange()
        steady_axes(plot)
        item = plot.plot(pen=pg.mkPen(colour, width=1.5))
        item.setDownsampling(auto=True, method="peak")
        item.setClipToView(True)
        return item

    def refresh(self) -> None:
        """Show the timeline's current curves (one range change per plot, not one per item)."""
        t = self.timeline
        for plot, item, curve in ((self.loss_plot, self.loss_item, t.loss),
                                  (self.norm_plot, self.norm_item, t.norm)):
            x, y = curve.x, curve.y
            item.setData(x, y, connect="finite")
            fit_range(plot, x, y, log=plot.ctrl.logYCheck.isChecked())


def fit_range(plot: pg.PlotItem, x: np.ndarray, y: np.ndarray, log: bool = False) -> None:
    """Set both axis ranges at once, with a little padding (NaN and, for log, ≤0 ignored)."""
    finite = np.isfinite(y) & ((y > 0) if log else True)
    if not finite.any():
        return
    values = np.log10(y[finite]) if log else y[finite]
    lo, hi = float(values.min()), float(values.max())
    pad = (hi - lo) * 0.05 or abs(hi) * 0.05 or 1.0
    plot.vb.setRange(xRange=(float(x[0]), nice_ceiling(float(x[-1]) + 0.5)),
                     yRange=(lo - pad, hi + pad), padding=0, update=True)


def nice_ceiling(value: float) -> float:
    """The smallest "round" number (1, 1.5, 2, 3, 4, 5, 6 or 8 × 10^k) at or above ``value``,
    so that the x axis, and its tick labels, change only now and then."""
    if value <= 1:
        return 1.0
    scale = 10.0 ** math.floor(math.log10(value))
    return next(m * scale for m in (1, 1.5, 2, 3, 4, 5, 6, 8, 10) if m * scale >= value)
