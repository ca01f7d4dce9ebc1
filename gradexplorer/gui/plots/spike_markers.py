"""Spike events as clickable markers on the loss and gradient-norm curves (live and followed).

One triangle per event at its first flagged step, on each curve at that step's value (at the
top of the plot where the value is NaN/Inf or not drawn); ``clicked(event)`` when one is
clicked. A vertical line marks the step picked (a spike or a divergence).
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QObject, Signal

from gradexplorer.core.diagnose.spikes import SpikeEvent
from gradexplorer.gui.theme import ALARM, SELECTION
from gradexplorer.gui.throttle import throttled

REDRAW_MS = 150
SIZE = 13


class SpikeMarkers(QObject):
    """Markers on ``curves`` (a TrainingCurves) for ``curves.timeline``'s spike events."""

    clicked = Signal(object)  # the SpikeEvent

    def __init__(self, curves, parent=None) -> None:
        super().__init__(parent)
        self.curves, self.timeline = curves, curves.timeline
        self.items: dict[str, pg.ScatterPlotItem] = {}
        self.lines: list[pg.InfiniteLine] = []
        for key, plot in (("loss", curves.loss_plot), ("norm", curves.norm_plot)):
            item = pg.ScatterPlotItem(symbol="t1", size=SIZE, pen=pg.mkPen("#ffffff", width=1),
                                      brush=pg.mkBrush(ALARM), hoverable=True,
                                      hoverSize=SIZE + 4, tip=self._tip)
            item.setZValue(20)
            item.sigClicked.connect(self._clicked)
            plot.addItem(item)
            self.items[key] = item
            line = pg.InfiniteLine(angle=90, pen=pg.mkPen(SELECTION, width=1.5))
            line.setVisible(False)
            plot.addItem(line, ignoreBounds=True)
            self.lines.append(line)
        self.refresh_soon = throttled(self.refresh, timeout=REDRAW_MS, parent=self)
        for plot in (curves.loss_plot, curves.norm_plot):
            plot.vb.sigYRangeChanged.connect(self._range_changed)  # NaN markers stay at the top
        self.timeline.changed.connect(self.refresh_soon)
        curves.overlay.changed.connect(self.refresh_soon)  # the x axis: step, or time

    def _range_changed(self, *_args) -> None:
        if any(len(item.data) for item in self.items.values()):
            self.refresh_soon()

    def _x(self, step: int) -> float:
        """Where ``step`` is on the curves' x axis (step, relative or wall time)."""
        overlay = self.curves.overlay
        return float(overlay.x_of(overlay.runs[0], np.array([step]))[0])

    @staticmethod
    def _tip(x, y, data) -> str:
        return data.summary() if isinstance(data, SpikeEvent) else f"step {x:g}"

    def events(self) -> list[SpikeEvent]:
        return self.timeline.ledger.events()

    def refresh(self) -> None:
        """Place one marker per event on each curve."""
        events = self.events()
        for key, curve, plot in (("loss", self.timeline.loss, self.curves.loss_plot),
                                 ("norm", self.timeline.norm, self.curves.norm_plot)):
            xs, ys = [], []
            for event in events:
                xs.append(self._x(event.step))
                ys.append(self._height(curve, event.step, plot))
            self.items[key].setData(xs, ys, data=events)

    def _height(self, curve, step: int, plot) -> float:
        """The curve's value at ``step`` (in the plot's y units), else the top of the view."""
        x, y = curve.x, curve.y
        at = np.flatnonzero(x == step)
        value = float(y[at[-1]]) if len(at) else math.nan
        log = plot.ctrl.logYCheck.isChecked()
        if math.isfinite(value) and (value > 0 or not log):
            return math.log10(value) if log else value
        return self._top(plot)

    @staticmethod
    def _top(plot) -> float:
        """Just inside the top of the view, by half a marker and a little: the whole marker
        shows and takes clicks (the view clips its children at its edge, where a marker placed
        exactly on the edge is under the mouse or not by rounding)."""
        bottom, top = plot.vb.viewRange()[1]
        pixel = plot.vb.viewPixelSize()[1] if plot.vb.width() > 0 and plot.vb.height() > 0 else 0.0
        inset = pixel * (SIZE / 2 + 2) if math.isfinite(pixel) and pixel > 0 else 0.0
        return max(bottom, top - inset)

    def _clicked(self, _item, points, *_args) -> None:
        if len(points):
            self.clicked.emit(points[0].data())

    def mark_step(self, step: int | None) -> None:
        """A vertical line at ``step`` on both curves (None: none)."""
        for line in self.lines:
            line.setVisible(step is not None)
            if step is not None:
                line.setValue(self._x(step))
