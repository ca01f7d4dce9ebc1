"""Spike events as clickable markers on the loss and gradient-norm curves (live and followed).

One triangle per event at its first flagged step, on each curve at that step's value (at the
top of the plot where the value is NaN/Inf or not drawn), for every shown run of the overlay
(each in its run's colour while runs are overlaid, its tooltip naming the run);
``clicked(event)`` when one is clicked. A vertical line marks the step picked (a spike or a
divergence).
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
    """Markers on ``curves`` (a TrainingCurves) for the spike events of every shown run of its
    overlay: the window's own run's in ``items``, the others' in their run's colour, each
    marker's tooltip naming its run while runs are overlaid. A click on another run's marker
    makes that run the reference (the Ledger, Optimizer and tiles show it) before ``clicked``."""

    clicked = Signal(object)  # the SpikeEvent

    def __init__(self, curves, parent=None) -> None:
        super().__init__(parent)
        self.curves, self.timeline = curves, curves.timeline
        self.items = self._markers()  # the window's own run's: {"loss": item, "norm": item}
        self.others: list[dict[str, pg.ScatterPlotItem]] = []  # the other shown runs' (reused)
        self._run_of: dict[int, object] = {}  # id(item) -> the OverlayRun it marks now
        self.lines: list[pg.InfiniteLine] = []
        for plot in (curves.loss_plot, curves.norm_plot):
            line = pg.InfiniteLine(angle=90, pen=pg.mkPen(SELECTION, width=1.5))
            line.setVisible(False)
            plot.addItem(line, ignoreBounds=True)
            self.lines.append(line)
        self.refresh_soon = throttled(self.refresh, timeout=REDRAW_MS, parent=self)
        for plot in (curves.loss_plot, curves.norm_plot):
            plot.vb.sigYRangeChanged.connect(self._range_changed)  # NaN markers stay at the top
        self.timeline.changed.connect(self.refresh_soon)
        curves.overlay.changed.connect(self.refresh_soon)  # the x axis, the runs shown

    def _markers(self) -> dict[str, pg.ScatterPlotItem]:
        """A marker item on each curve (loss, norm)."""
        items = {}
        for key, plot in (("loss", self.curves.loss_plot), ("norm", self.curves.norm_plot)):
            item = pg.ScatterPlotItem(symbol="t1", size=SIZE, pen=pg.mkPen("#ffffff", width=1),
                                      brush=pg.mkBrush(ALARM), hoverable=True, hoverSize=SIZE + 4)
            item.setZValue(20)
            item.sigClicked.connect(self._clicked)
            plot.addItem(item)
            items[key] = item
        return items

    def _range_changed(self, *_args) -> None:
        if any(len(item.data) for marks in (self.items, *self.others) for item in marks.values()):
            self.refresh_soon()

    def _x(self, step: int, run=None) -> float:
        """Where ``step`` of ``run`` (default: the reference run, the window's own unless
        another was made it) is on the curves' x axis."""
        overlay = self.curves.overlay
        run = overlay.runs[overlay.reference] if run is None else run
        return float(overlay.x_of(run, np.array([step]))[0])

    @staticmethod
    def _tip(x, data, run_name: str | None = None) -> str:
        """The event's summary (``run NAME: …`` while runs are overlaid)."""
        text = data.summary() if isinstance(data, SpikeEvent) else f"step {x:g}"
        return text if run_name is None else f"run {run_name}: {text}"

    def events(self) -> list[SpikeEvent]:
        """The window's own run's spike events."""
        return self.timeline.ledger.events()

    def refresh(self) -> None:
        """Place one marker per event of each shown run on each curve."""
        overlay = self.curves.overlay
        own = overlay.runs[0]
        others = [r for r in overlay.shown() if r is not own]
        while len(self.others) < len(others):
            self.others.append(self._markers())
        marked = [(own, self.items, self.events() if own.visible else [])]
        marked += [(run, self.others[i], run.source.spike_events()) for i, run in enumerate(others)]
        marked += [(None, marks, []) for marks in self.others[len(others):]]
        self._run_of = {}
        for run, marks, events in marked:
            colour = run.colour if run is not None and overlay.overlaid else ALARM
            for key, plot in (("loss", self.curves.loss_plot), ("norm", self.curves.norm_plot)):
                item = marks[key]
                self._run_of[id(item)] = run
                if run is None:
                    item.setData([], [])
                    continue
                curve = run.source.figure("loss" if key == "loss" else "headline_norm")
                xs = [self._x(event.step, run) for event in events]
                ys = [self._height(curve, event.step, plot) for event in events]
                name = run.name if overlay.overlaid else None
                item.setData(xs, ys, data=events, brush=pg.mkBrush(colour),
                             tip=lambda x, y, data, name=name: self._tip(x, data, name))

    def _height(self, curve: tuple[np.ndarray, np.ndarray], step: int, plot) -> float:
        """The curve's value at ``step`` (``curve``: its steps and values; in the plot's y
        units), else the top of the view."""
        x, y = curve
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

    def _clicked(self, item, points, *_args) -> None:
        if len(points):
            overlay, run = self.curves.overlay, self._run_of.get(id(item))
            if run is not None and run in overlay.runs:
                overlay.set_reference(overlay.runs.index(run))  # its Ledger, Optimizer, tiles
            self.clicked.emit(points[0].data())

    def mark_step(self, step: int | None) -> None:
        """A vertical line at the reference run's ``step`` on both curves (None: none)."""
        for line in self.lines:
            line.setVisible(step is not None)
            if step is not None:
                line.setValue(self._x(step))
