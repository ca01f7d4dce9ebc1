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
from PySide6.QtWidgets import QHBoxLayout, QLabel, QScrollArea, QVBoxLayout, QWidget

from gradexplorer.gui.models.selection import step_caption
from gradexplorer.gui.models.step_ledger import WINDOW
from gradexplorer.gui.models.timeline import TimelineModel
from gradexplorer.gui.plots.curves import fit_range
from gradexplorer.gui.text.number_text import format_number
from gradexplorer.gui.theme import ALARM, steady_axes
from gradexplorer.gui.throttle import throttled

REDRAW_MS = 120
MAX_SKIP_LINES = 200  # the newest skipped steps drawn as lines
ACCUMULATED_PEN, APPLIED_PEN = "#8e24aa", "#e53935"
AS_APPLIED = ("as applied (after unscale and clip: every figure in the app but the Training "
              "curve's global norm, which is as accumulated)")
LEGEND = (f"global ‖g‖: <span style='color:{ACCUMULATED_PEN}'>╌ as accumulated (÷ scale)</span> · "
          f"<span style='color:{APPLIED_PEN}'>— as applied</span> · "
          f"<span style='color:{ALARM}'>┆ skipped step</span>")


def number(value, digits: int = 6) -> str:
    """``—`` for unknown, else the app's compact number."""
    return "—" if value is None else format_number(value, digits)


def ledger_lines(ledger, summary: dict | None = None) -> list[str]:
    """The step's ledger as ``label: value`` lines (plain text; the panel and tests read it)."""
    if ledger is None:
        return ["no step yet"]
    skipped = "yes" + (f" ({ledger.skip_reason})" if ledger.skip_reason else "") \
        if ledger.skipped else "no"
    lines = [f"optimizer step: {ledger.optimizer_step}",
             f"iteration (backward passes): {number(ledger.iteration)}",
             f"micro-batches: {number(ledger.micro_batches)}",
             f"loss (mean of micro-batches): {number(ledger.loss)}",
             f"global norm as accumulated: {number(ledger.grad_norm_accumulated)}"
             + (f" (÷ scale: {number(ledger.grad_norm_accumulated / ledger.scale)})"
                if ledger.scale and ledger.grad_norm_accumulated is not None else ""),
             f"global norm as applied: {number(ledger.grad_norm_applied)}",
             f"clip coef: {number(ledger.clip_coef)}"
             + ("" if ledger.clipped is None else (" (clipped)" if ledger.clipped else " (not clipped)")),
             f"scale: {'none (no GradScaler)' if ledger.scale is None else number(ledger.scale)}",
             f"skipped: {skipped}"]
    if ledger.nan_count or ledger.inf_count:
        lines.append(f"NaN/Inf in the gradient: {ledger.nan_count}/{ledger.inf_count}")
    if ledger.lr:
        lines.append("lr: " + ", ".join(format_number(v, 4) for v in ledger.lr))
    if summary is not None:
        lines.append(rolling_text(summary))
    return lines


def rolling_text(summary: dict) -> str:
    """``last 100 steps: clipped 12% · 1 skipped``."""
    rate = summary["clip_rate"]
    clip = "clip rate —" if rate is None else f"clipped {rate:.0%}"
    return f"last {summary['steps']} steps: {clip} · {summary['skipped']} skipped"


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
        self.heading = QLabel(f"Figures describe the gradient {AS_APPLIED}.")
        self.heading.setToolTip(self.heading.text())
        self.legend = QLabel(LEGEND)  # above the curves, never over them (a short window's plot
        self.legend.setWordWrap(True)  # is too small for an in-plot legend); wraps when narrow
        self.legend.setMinimumWidth(1)
        self.heading.setMinimumWidth(1)  # cut off when narrow, never widening the dock
        self.details = QLabel("no step yet")
        self.details.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.details.setAlignment(Qt.AlignTop | Qt.AlignLeft)
        details_area = QScrollArea()  # the dock may be short: the details scroll
        details_area.setWidget(self.details)
        details_area.setWidgetResizable(True)
        details_area.setFrameShape(QScrollArea.NoFrame)
        details_area.setMinimumWidth(240)  # the window still fits 800 px beside the side docks
        self.plot = pg.PlotWidget()
        item = self.plot.getPlotItem()
        item.showGrid(x=True, y=True, alpha=0.2)
        item.disableAutoRange()
        steady_axes(item, steps=True)
        self.accumulated = item.plot(pen=pg.mkPen(ACCUMULATED_PEN, width=1.5, style=Qt.DashLine),
                                     name="as accumulated (.grad after backward, ÷ scale)")
        self.applied = item.plot(pen=pg.mkPen(APPLIED_PEN, width=1.5), name="as applied")
        self.skipped: list[pg.InfiniteLine] = []  # one red dashed line per skipped step
        self.step_line = pg.InfiniteLine(angle=90, pen=pg.mkPen("#ff6f00", width=1))
        self.step_line.setVisible(False)
        item.addItem(self.step_line, ignoreBounds=True)
        row = QWidget()
        split = QHBoxLayout(row)
        split.setContentsMargins(4, 0, 0, 0)
        split.addWidget(details_area)
        curves = QVBoxLayout()
        curves.setSpacing(0)
        curves.addWidget(self.legend)
        curves.addWidget(self.plot, 1)
        split.addLayout(curves, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 2, 4, 2)
        layout.addWidget(self.heading)
        layout.addWidget(row, 1)
        self.refresh_soon = throttled(self.refresh, timeout=REDRAW_MS, parent=self)
        timeline.changed.connect(self.refresh_soon)
        self.plot.scene().sigMouseClicked.connect(self._clicked)

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
        lines = ledger_lines(ledger, track.summary(WINDOW))
        if ledger is None and self.pinned is not None:
            lines = [f"step {self.pinned}: not in the ledger the app holds"]
        caption = step_caption(self.pinned, self.timeline.newest_step)
        if caption:
            lines.insert(0, f"at {caption} (End: back to live)")
        run = getattr(self.timeline, "run_name", None)  # runs overlaid: the reference run's
        if run is not None:
            lines.insert(0, f"run: {run} (the reference run)")
        self.details.setText("\n".join(lines))
        steps, acc, applied = (np.asarray(v, dtype=float) for v in track.series())
        self.accumulated.setData(steps, acc, connect="finite")
        self.applied.setData(steps, applied, connect="finite")
        self._mark_skipped(track.skipped_steps()[-MAX_SKIP_LINES:])
        both = np.concatenate([acc, applied]) if len(steps) else np.array([])
        if len(steps):
            fit_range(self.plot.getPlotItem(), steps, both)
            self.plot.getPlotItem().vb.setXRange(steps[0], steps[-1] + 0.5, padding=0)
        self.step_line.setVisible(self.pinned is not None)
        if self.pinned is not None:
            self.step_line.setValue(self.pinned)
