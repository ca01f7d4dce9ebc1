"""The "Optimizer" tab: one of the selected parameter's optimizer figures over the steps.

The figures are the optimizer's own state after each step (the core's ``optimizer_state``, as
``watch`` records it): ‖m‖ and RMS √v̂ of Adam-like optimizers, the effective step size
lr / (√v̂ + ε), ‖momentum buffer‖ of SGD, the group's learning rate, and the measured
‖Δθ‖/‖θ‖; a step where θ was all zeros is a "new (θ was 0)" marker, never an infinite point.
It reads ``timeline.optimizer`` (OptimizerTrack) on its own throttle: live session and run
directories alike. The y axis names the figure; there is no in-plot legend to cover the curve.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QComboBox, QHBoxLayout, QVBoxLayout, QWidget

from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.model.membership import module_parameters
from gradexplorer.gui.graph.legend import reads_whole
from gradexplorer.gui.models.optimizer_track import CURVE_FIELDS
from gradexplorer.gui.panels.name_label import NameLabel
from gradexplorer.gui.plots.curves import fit_range
from gradexplorer.gui.plots.hover import HoverReadout, ReadoutLabel, nearest_point
from gradexplorer.gui.text.number_text import format_number, update_ratio_text
from gradexplorer.gui.theme import ACCENT, ALARM, SELECTION, steady_axes, value_ticks
from gradexplorer.gui.throttle import throttled

REDRAW_MS = 140  # about 7 times a second, on its own timer
NEW = "new (θ was 0)"
# field -> (menu text, y axis: which state it is, tooltip)
FIGURES = {
    "exp_avg_norm": ("‖m‖ (Adam)", "‖m‖",
                     "norm of Adam's first moment (exp_avg) after the step"),
    "exp_avg_sq_rms": ("RMS √v̂ (Adam)", "RMS √v̂",
                       "RMS of √v̂, Adam's bias-corrected second moment (exp_avg_sq), after the step"),
    "effective_lr": ("eff. lr (Adam)", "lr/(√v̂+ε)",
                     "mean over elements of lr / (√v̂ + ε): the step size Adam gives, after the step"),
    "momentum_norm": ("‖momentum‖ (SGD)", "‖momentum‖",
                      "norm of SGD's momentum buffer after the step"),
    "lr": ("lr (group)", "lr", "learning rate of the parameter's group"),
    "update_ratio": ("‖Δθ‖/‖θ‖", "‖Δθ‖/‖θ‖",
                     "measured ‖θ after − θ before‖ / ‖θ before‖; ▲ marks a step where θ was 0"),
    "snr": ("SNR (noise scale)", "SNR, smoothed",
            "the gradient's signal-to-noise ratio across the step's micro-batches or DDP ranks, "
            "smoothed: b·EMA(|G|²)/EMA(tr Σ); ≤ 0: all noise at this batch size (docs/noise.md)"),
    "b_simple_ema": ("B_simple (model)", "B_simple, smoothed",
                     "the model's gradient noise scale tr(Σ)/|G|², smoothed (EMAs of each), its "
                     "±1 standard-error band shaded and each step's own estimate as dots: a "
                     "batch near it trains about as well per sample as a smaller one "
                     "(docs/noise.md)"),
}
BAND_BRUSH = (30, 136, 229, 80)  # ACCENT, faint: the smoothed B_simple's ±1 s.e. band
FIRST_CHOICE = ("exp_avg_norm", "momentum_norm", "update_ratio", "lr")  # shown until one is picked


class OptimizerCurves(QWidget):
    """Observes the selection and the timeline; ``refresh`` pushes the figure into the curve."""

    def __init__(self, selection, timeline, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.selection, self.timeline = selection, timeline
        self.chosen: str | None = None  # the figure the user picked (None: FIRST_CHOICE)
        self.param: str | None = None
        self.steps, self.values = np.zeros(0), np.zeros(0)  # what the curve shows (raw)
        self.note = self.band_note = ""
        self.name_label = NameLabel("no parameter")  # shortened from the left, never widens the dock
        self.figure_box = QComboBox()
        for field in CURVE_FIELDS:
            self.figure_box.addItem(FIGURES[field][0], field)
            self.figure_box.setItemData(self.figure_box.count() - 1, FIGURES[field][2], 3)  # tooltip
        reads_whole(self.figure_box)
        self.figure_box.setToolTip("which of the optimizer's figures to draw")
        self.figure_box.activated.connect(lambda _i: self.choose(self.figure_box.currentData()))
        self.log_box = QCheckBox("log y")
        self.log_box.toggled.connect(self.set_log)
        self.readout = ReadoutLabel()
        self.plot = pg.PlotWidget()
        item = self.plot.getPlotItem()
        item.showGrid(x=True, y=True, alpha=0.2)
        item.disableAutoRange()
        steady_axes(item)
        self.curve = item.plot(pen=pg.mkPen(ACCENT, width=1.5))
        self.curve.setDownsampling(auto=True, method="peak")
        self.curve.setClipToView(True)
        self.step_line = pg.InfiniteLine(angle=90, pen=pg.mkPen(SELECTION, width=1.5))
        self.step_line.setVisible(False)  # the step the window shows (none while live)
        item.addItem(self.step_line, ignoreBounds=True)
        self.new_marks = item.plot(pen=None, symbol="t1", symbolSize=11, symbolBrush=ALARM,
                                   symbolPen=None)  # steps where θ was 0 (ratio infinite)
        # B_simple: the smoothed one's ±1 s.e. band and each step's own estimate
        edge = pg.mkPen((30, 136, 229, 140), width=1, style=Qt.DashLine)
        self.band_low, self.band_high = item.plot(pen=edge), item.plot(pen=edge)
        self.band = pg.FillBetweenItem(self.band_low, self.band_high, brush=BAND_BRUSH)
        item.addItem(self.band)
        self.raw = item.plot(pen=None, symbol="o", symbolSize=4, symbolBrush=ACCENT,
                             symbolPen=None)
        header = QHBoxLayout()
        header.setContentsMargins(4, 0, 4, 0)
        header.addWidget(self.name_label, 2)
        header.addWidget(self.figure_box)
        header.addWidget(self.log_box)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addLayout(header)
        layout.addWidget(self.readout)
        layout.addWidget(self.plot, 1)
        self.hover = HoverReadout(self.plot.scene(), [item], self.describe_point, self.show_readout)
        self.stale = False  # something changed while the tab was hidden: redraw when shown
        self.shown = True  # False while its tab is behind another (``set_shown``)
        self.refresh_soon = throttled(self.refresh, timeout=REDRAW_MS, leading=False, parent=self)
        timeline.changed.connect(lambda: self._changed(self.refresh_soon))
        selection.changed.connect(lambda _s: self._changed(self.refresh))

    def _changed(self, redraw) -> None:
        """Redraw when shown; a hidden tab reads nothing (a run's series) until it is shown."""
        if self.shown and self.isVisible():
            redraw()
        else:
            self.stale = True

    def set_shown(self, shown: bool) -> None:
        """Its tab came to the front (True) or went behind another (its dock's visibilityChanged)."""
        self.shown = shown
        if shown and self.stale:
            self.refresh()

    def showEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().showEvent(event)
        if self.stale and self.shown:
            self.refresh()

    @property
    def field(self) -> str:
        """The figure shown."""
        return self.figure_box.currentData()

    def choose(self, field: str) -> None:
        """Show ``field`` (one of CURVE_FIELDS) from now on."""
        self.chosen = field
        self.figure_box.setCurrentIndex(CURVE_FIELDS.index(field))
        self.refresh()

    def set_log(self, log: bool) -> None:
        self.plot.getPlotItem().setLogMode(y=log)
        self.refresh()

    def shown_param(self) -> str | None:
        """The selected parameter, else the first of the selected module's, else the first."""
        names = self.timeline.optimizer.names
        current = self.selection.current
        if current.param:
            return current.param
        if current.module is not None:
            found = module_parameters(names, current.module)
            if found:
                return found[0]
        return self.param if self.param in names else (names[0] if names else None)

    def refresh(self) -> None:
        """Draw the shown parameter's figure over the steps the timeline holds."""
        self.stale = False
        self.param = name = self.shown_param()
        latest = self.timeline.latest
        if name is None or latest is None:
            steps, figures = np.zeros(0), {f: np.zeros(0) for f in CURVE_FIELDS}
        else:
            try:
                steps, figures = self.timeline.optimizer.series(name, latest.step)
            except UserError as exc:  # a damaged run: one line where the curve would be
                self.curve.setData([], [])
                self.new_marks.setData([], [])
                self.note = str(exc)
                self.readout.setText(self.note)
                return
        if self.chosen is None:
            self.figure_box.setCurrentIndex(CURVE_FIELDS.index(next(
                (f for f in FIRST_CHOICE if np.isfinite(figures[f]).any() or np.isinf(figures[f]).any()),
                FIRST_CHOICE[0])))
        field = self.field
        at = figures.get("noise_at") if field in ("snr", "b_simple_ema") else None
        if at is not None:  # a run's noise scale on a cadence (noise_every): its steps, joined
            steps, figures = steps[at], {f: v[at] for f, v in figures.items()}
        values = figures[field]
        new = np.isposinf(values) if field == "update_ratio" else np.zeros(len(values), bool)
        shown = np.where(new, np.nan, values)
        self.steps, self.values = steps, values
        self.curve.setData(steps, shown, connect="finite")
        self.curve.setSymbol("o" if np.isfinite(shown).sum() == 1 else None)
        item = self.plot.getPlotItem()
        item.setLabel("left", FIGURES[field][1])
        item.getAxis("left").setToolTip(FIGURES[field][2])
        log = self.log_box.isChecked()
        finite = shown[np.isfinite(shown) & ((shown > 0) if log else True)]
        floor = float(finite.min()) if finite.size else (1.0 if log else 0.0)
        self.new_marks.setData(steps[new], np.full(int(new.sum()), floor))
        value_ticks(item, bool(finite.size))
        extra = self._show_band(steps, figures if field == "b_simple_ema" else None)
        fit_range(item, np.concatenate([steps, steps[:len(extra)]]),
                  np.concatenate([np.where(new, floor, shown), extra]), log=log)
        self.name_label.set_name(name)
        at = self.selection.current.step
        self.step_line.setVisible(at is not None)
        if at is not None:
            self.step_line.setValue(at)
        self.note = self._note(name, field, steps, values, new)
        if field == "b_simple_ema" and np.isfinite(values).any():  # short: a third of 1024 px
            last = int(np.flatnonzero(np.isfinite(values))[-1])
            self.note = f"model · step {int(steps[last])}: B_simple " \
                        f"{format_number(values[last], 4)}{self.band_note}"
        run = getattr(self.timeline, "run_name", None)  # runs overlaid: the reference run's
        if run is not None:
            self.note = f"run {run} · {self.note}"
        self.readout.setText(self.note)

    def _show_band(self, steps: np.ndarray, figures: dict | None) -> np.ndarray:
        """B_simple's band and raw estimates drawn (``figures``), or taken away (None); the
        values the y range must hold besides the curve's (the band's edges)."""
        if figures is None:
            for line in (self.band_low, self.band_high, self.raw):
                line.setData([], [])
            return np.zeros(0)
        low, high = figures["b_simple_low"], figures["b_simple_high"]
        both = np.isfinite(low) & np.isfinite(high)
        self.band_low.setData(steps[both], low[both])
        self.band_high.setData(steps[both], high[both])
        raw = figures["b_simple"]
        keep = np.isfinite(raw) & (raw > 0)  # a step whose |G|²_est ≤ 0 has no scale to draw
        self.raw.setData(steps[keep], raw[keep])
        self.band_note = "" if not both.any() else \
            f" ±1 s.e. {format_number(low[both][-1], 4)}..{format_number(high[both][-1], 4)}"
        return np.where(both, high, np.nan)

    @staticmethod
    def _note(name, field, steps, values, new) -> str:
        label = FIGURES[field][1]
        if field == "b_simple_ema" and len(steps) and not np.isfinite(values).any():
            return "no noise scale: give the session 2 or more micro-batches a step (docs/noise.md)"
        if name is None:
            return "select a parameter"
        if not len(steps):
            return "no optimizer step yet"
        if not (np.isfinite(values) | new).any():
            return f"the optimizer keeps no {label} for {name}"
        last = len(values) - 1
        text = f"after step {int(steps[last])}: {label} {_text(field, values[last])}"
        if new.any():
            where = ", ".join(str(int(s)) for s in steps[new][:5]) + ("…" if new.sum() > 5 else "")
            text += f" · ▲ {NEW} at step {where}"
        return text

    def show_readout(self, text: str) -> None:
        self.readout.setText(text or self.note)

    def describe_point(self, _plot, x: float, _y: float) -> str:
        """``step N · ‖m‖ V`` for the step nearest the mouse (``new (θ was 0)`` for such a step)."""
        marked = np.where(np.isposinf(self.values), 0.0, self.values)
        index = nearest_point(self.steps, marked, x)
        if index is None:
            return ""
        return f"step {int(self.steps[index])} · {FIGURES[self.field][1]} " \
               f"{_text(self.field, float(self.values[index]))}"


def _text(field: str, value: float) -> str:
    if not np.isfinite(value) and not np.isposinf(value):
        return "—"
    return update_ratio_text(value, 6) if field == "update_ratio" else format_number(value, 6)
