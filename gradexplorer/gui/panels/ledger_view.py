"""The step ledger in the app: which gradient the figures describe, and what each step did.

A "Ledger" panel: the details of one optimizer step (the newest, or the one a spike marker or
a divergence picked) — optimizer step, micro-batches, the global norm as accumulated (``.grad``
after the last backward, before unscale and clip) and as applied (what the optimizer used: the
figure every other view shows), clip coefficient, GradScaler scale, skipped and why — with the
rolling clip rate and skip count, over curves of the accumulated and applied global norms.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QLabel, QScrollArea, QSizePolicy, QSplitter, QVBoxLayout, QWidget

from gradexplorer.gui.models.selection import step_caption
from gradexplorer.gui.models.step_ledger import WINDOW
from gradexplorer.gui.models.timeline import TimelineModel
from gradexplorer.gui.panels.elided_label import ElidedLabel
from gradexplorer.gui.panels.ledger_figures import LedgerFigures, ledger_rows
from gradexplorer.gui.plots.curves import fit_range
from gradexplorer.gui.theme import ALARM, steady_axes
from gradexplorer.gui.throttle import throttled

REDRAW_MS = 120
MAX_SKIP_LINES = 200  # the newest skipped steps drawn as lines
ACCUMULATED_PEN, APPLIED_PEN = "#8e24aa", "#e53935"
AS_APPLIED = ("as applied (after unscale and clip: every figure in the app but the Training "
              "curve's global norm, which is as accumulated)")
HEADING = "Figures: the gradient as applied (after unscale and clip)"  # one line; hover: the rest
LEGEND = (f"<span style='color:{ACCUMULATED_PEN}'>╌&nbsp;accumulated</span> "
          f"<span style='color:{APPLIED_PEN}'>—&nbsp;applied</span>")
SKIPPED_KEY = f" <span style='color:{ALARM}'>┆&nbsp;skipped</span>"  # named while one is drawn
LEGEND_TIP = ("global gradient norm as accumulated (.grad after the last backward, divided by "
              "the GradScaler's scale where there is one: dashed) and as applied (after unscale "
              "and clip: solid); a red dashed line: a skipped step")
TWO_COLUMNS = 3.4  # a Ledger this many times as wide as a column of figures shows two
PLOT_LEAST = 100  # the Ledger asks no more width than the Training dock (a wider least took it
# from the side docks at 1024×700); the splitter gives the plot the rest: ~190 px there


class WrappedKey(QLabel):
    """The curves' key: as many lines as its width needs, and no more (a word-wrapped label in
    a splitter asked for two lines where one fitted, taking a third of a short plot's height)."""

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        lines = self.heightForWidth(self.width())
        if lines > 0 and lines != self.height():
            self.setFixedHeight(lines)


class LedgerPanel(QWidget):
    """Observes the timeline, or the reference run's figures (a ReferenceFigures), throttled;
    ``show_step(n)`` pins the details to step ``n``, ``show_step(None)`` follows the newest
    step again (the window's selection step calls it: step_forensics.py). A click on the
    curves: ``step_clicked(step)`` of the nearest step."""

    step_clicked = Signal(int)

    def __init__(self, timeline: TimelineModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.timeline = timeline
        self.pinned: int | None = None
        self.heading = ElidedLabel(HEADING, minimum=40)  # one line, never cut mid-word
        self.heading.setToolTip(f"Every figure in the app describes the gradient {AS_APPLIED}. The "
                                "curves: the global gradient norm as accumulated (dashed) and as "
                                "applied.")
        self.legend = WrappedKey(LEGEND)  # above the curves, never over them (a short window's plot
        self.legend.setWordWrap(True)  # is too small for an in-plot legend); wraps when narrow
        self.legend.setMinimumWidth(1)
        self.legend.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Fixed)  # as tall as its lines
        self.legend.setToolTip(LEGEND_TIP)
        small = self.legend.font()
        small.setPointSizeF(max(7.0, small.pointSizeF() * 0.85))
        self.legend.setFont(small)
        self.details = LedgerFigures()  # short names beside values: no sideways scrolling
        details_area = QScrollArea()  # the dock may be short: the figures scroll, downwards only
        details_area.setWidget(self.details)
        details_area.setWidgetResizable(True)
        details_area.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        details_area.setFrameShape(QScrollArea.NoFrame)
        details_area.setMinimumWidth(self.details.least_width()  # every figure whole, never
                                     + details_area.verticalScrollBar().sizeHint().width())  # wider
        self.details_area = details_area
        self.plot = pg.PlotWidget()
        item = self.plot.getPlotItem()
        item.showGrid(x=True, y=True, alpha=0.2)
        item.disableAutoRange()
        steady_axes(item, left_width=44, steps=True)  # (the norms' ticks are short numbers)
        self.accumulated = item.plot(pen=pg.mkPen(ACCUMULATED_PEN, width=1.5, style=Qt.DashLine),
                                     name="as accumulated (.grad after backward, ÷ scale)")
        self.applied = item.plot(pen=pg.mkPen(APPLIED_PEN, width=1.5), name="as applied")
        self.skipped: list[pg.InfiniteLine] = []  # one red dashed line per skipped step
        self.step_line = pg.InfiniteLine(angle=90, pen=pg.mkPen("#ff6f00", width=1))
        self.step_line.setVisible(False)
        item.addItem(self.step_line, ignoreBounds=True)
        row = self.row = QSplitter(Qt.Horizontal)  # figures | curves, the plot the wider (it was
        row.setChildrenCollapsible(False)  # ~60 px at 1024×700 beside 240 px of lines); drag it
        row.addWidget(details_area)
        right = QWidget()
        curves = QVBoxLayout(right)
        curves.setContentsMargins(0, 0, 0, 0)
        curves.setSpacing(0)
        curves.addWidget(self.legend)
        curves.addWidget(self.plot, 1)
        row.addWidget(right)
        row.setStretchFactor(0, 0)  # the figures as wide as they need, the plot the rest
        row.setStretchFactor(1, 1)
        row.setSizes([details_area.minimumWidth(), 10_000])
        self.plot.setMinimumWidth(PLOT_LEAST)
        row.splitterMoved.connect(self._fit_columns)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.setSpacing(2)
        layout.addWidget(self.heading)
        layout.addWidget(row, 1)
        self.refresh_soon = throttled(self.refresh, timeout=REDRAW_MS, parent=self)
        timeline.changed.connect(self.refresh_soon)
        self.plot.scene().sigMouseClicked.connect(self._clicked)

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt API
        """A wide Ledger (1600×1000: ~800 px) shows its figures in two pairs of columns, so
        that a short dock needs no scrolling, and the plot keeps the rest."""
        super().resizeEvent(event)
        least = self.details_area.minimumWidth()
        columns = 2 if self.width() >= TWO_COLUMNS * least else 1
        if columns != self.details.columns:
            self.row.setSizes([least + (columns - 1) * (least + 10), 10_000])
            self.details.set_columns(columns)

    def _fit_columns(self, *_args) -> None:
        """As many pairs of columns as the figures' width holds (after a drag too)."""
        least = self.details_area.minimumWidth()
        self.details.set_columns(2 if self.details_area.width() >= 2 * least + 10 else 1)

    def _clicked(self, event) -> None:
        vb = self.plot.getPlotItem().vb
        if event.button() != Qt.LeftButton or not vb.sceneBoundingRect().contains(event.scenePos()):
            return
        steps = [led.optimizer_step for led in self.timeline.ledger.ledgers]
        if steps:
            x = vb.mapSceneToView(event.scenePos()).x()
            self.step_clicked.emit(int(min(steps, key=lambda s: abs(s - x))))

    def _mark_skipped(self, steps: list[int]) -> None:
        item = self.plot.getPlotItem()
        while len(self.skipped) < len(steps):
            line = pg.InfiniteLine(angle=90, pen=pg.mkPen(ALARM, width=1, style=Qt.DashLine))
            item.addItem(line, ignoreBounds=True)
            self.skipped.append(line)
        for i, line in enumerate(self.skipped):
            line.setVisible(i < len(steps))
            if i < len(steps):
                line.setValue(steps[i])

    def show_step(self, step: int | None) -> None:
        """Details of ``step`` (None: the newest) and a line at it on the curves."""
        self.pinned = step
        self.refresh()

    def shown_ledger(self):
        track = self.timeline.ledger
        return track.latest if self.pinned is None else track.ledger_at(self.pinned)

    def refresh(self) -> None:
        track = self.timeline.ledger
        ledger = self.shown_ledger()
        rows = ledger_rows(ledger, track.summary(WINDOW))
        if ledger is None and self.pinned is not None:
            rows = [("", f"step {self.pinned}: not in the ledger the app holds")]
        caption = step_caption(self.pinned, self.timeline.newest_step)
        if caption:
            rows.insert(0, ("", f"at {caption} (End: back to live)"))
        run = getattr(self.timeline, "run_name", None)  # runs overlaid: the reference run's
        if run is not None:
            rows.insert(0, ("run", f"{run} (the reference run)"))
        self.details.show_rows(rows)
        steps, acc, applied = (np.asarray(v, dtype=float) for v in track.series())
        self.accumulated.setData(steps, acc, connect="finite")
        self.applied.setData(steps, applied, connect="finite")
        skipped = track.skipped_steps()[-MAX_SKIP_LINES:]
        self._mark_skipped(skipped)
        key = LEGEND + (SKIPPED_KEY if skipped else "")
        if key != self.legend.text():
            self.legend.setText(key)
        both = np.concatenate([acc, applied]) if len(steps) else np.array([])
        if len(steps):
            fit_range(self.plot.getPlotItem(), steps, both)
            self.plot.getPlotItem().vb.setXRange(steps[0], steps[-1] + 0.5, padding=0)
        self.step_line.setVisible(self.pinned is not None)
        if self.pinned is not None:
            self.step_line.setValue(self.pinned)
