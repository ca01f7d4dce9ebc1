"""Loss and global gradient-norm curves over steps, relative time or wall time, with the runs
of a ``RunOverlay`` drawn in their colours on the same scales.

The gradient-norm curve is the global norm as accumulated (÷ the GradScaler's scale: the
timeline's ``norm``); where the run clips or scales, the norm as applied is drawn beside it,
dashed, and a legend names both."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QSlider,
    QVBoxLayout,
    QWidget,
)

from gradexplorer.core.stats.curves import ema_smooth
from gradexplorer.gui.graph.legend import reads_whole
from gradexplorer.gui.models.run_overlay import X_LABELS, X_MODES, RunOverlay, TimelineSource
from gradexplorer.gui.models.timeline import TimelineModel
from gradexplorer.gui.plots.axes import padded_range
from gradexplorer.gui.plots.hover import HoverReadout, ReadoutLabel, nearest_point
from gradexplorer.gui.plots.legend_row import SharedKey
from gradexplorer.gui.plots.overlay_lines import Line, OverlayLines, set_x_axis, shared_range
from gradexplorer.gui.text.number_text import format_number
from gradexplorer.gui.theme import PLOT_PENS, steady_axes, value_ticks
from gradexplorer.gui.throttle import throttled

# short: the legend sits inside a plot a third of a 1024×700 window wide (the Ledger tab says the rest)
APPLIED_NAME = "applied"  # what the optimizer used, after unscale and clip
ACCUMULATED_NAME = "accumulated"  # .grad after backward, ÷ the GradScaler's scale
REDRAW_MS = 50  # at most 20 redraws a second while steps arrive
SMOOTHING = 0.9  # weight of the exponential moving average when "smooth" is on (as TensorBoard)
# the plots' least height: 120+ pixels of plot area above the step axis (at 1024×700 with three
# runs they had 29); a dock shorter than the toggles, the key and this scrolls them
PLOTS_LEAST = 148
KEY_LINES = 2  # the lines of key a comfortable dock leaves room for (three runs, clipped)


class TrainingCurves(QWidget):
    """Two x-linked plots side by side under a row of toggles (log y, smooth) and a readout of
    the value under the mouse; ``refresh`` pushes the timeline's data into the existing items.

    Observes ``timeline.changed`` through its own throttle (``refresh_soon``); long curves are
    drawn peak-downsampled and clipped to the view by pyqtgraph. A click on a plot (not on a
    spike marker): ``step_clicked(step)`` of the step nearest it.
    """

    step_clicked = Signal(int)

    def __init__(self, timeline: TimelineModel, parent: QWidget | None = None,
                 overlay: RunOverlay | None = None) -> None:
        super().__init__(parent)
        self.timeline = timeline
        self.overlay = overlay or RunOverlay(TimelineSource(timeline))
        self.refresh_soon = throttled(self.refresh, timeout=REDRAW_MS, parent=self)
        timeline.changed.connect(self.refresh_soon)
        self.overlay.changed.connect(self.refresh_soon)
        self.plots = pg.GraphicsLayoutWidget()
        self.plots.ci.setContentsMargins(2, 4, 6, 0)  # the plot area keeps the pixels
        self.plots.ci.setSpacing(4)
        self.loss_plot = self.plots.addPlot(row=0, col=0)  # named on the y axis: a title would
        self.norm_plot = self.plots.addPlot(row=0, col=1)  # take a short window's plot height
        self.norm_plot.setXLink(self.loss_plot)
        self.loss_plot.setLabel("left", "loss")  # x: the step (no axis label: the readout
        self.norm_plot.setLabel("left", "global ‖g‖")  # names it; the plots keep their height)
        self.loss_raw, self.loss_item = self._curves(self.loss_plot, PLOT_PENS["loss"])
        self.norm_raw, self.norm_item = self._curves(self.norm_plot, PLOT_PENS["norm"])
        self.applied_item = self.norm_plot.plot(pen=pg.mkPen(PLOT_PENS["norm"], width=1,
                                                             style=Qt.DashLine))
        self.applied_item.setDownsampling(auto=True, method="peak")
        self.applied_item.setClipToView(True)
        self.key = SharedKey()  # one key above both plots (the same runs), never over them
        self.loss_lines = OverlayLines(self.loss_plot, self.key.slot())  # the other runs' curves
        self.norm_lines = OverlayLines(self.norm_plot, self.key.slot())  # (its key: the applied
        # norm's line too, where the run clips or scales)
        self.x_box = QComboBox()  # short labels: the dock's least width stays as it was
        for mode in X_MODES:
            self.x_box.addItem(mode.split()[0], mode)
        reads_whole(self.x_box)
        self.x_box.setToolTip("x axis of the curves: step, relative time (seconds since each "
                              "run's first step) or wall time (the clock)")
        self.x_box.currentIndexChanged.connect(lambda i: self.overlay.set_x_mode(self.x_box.itemData(i)))
        self.log_box = QCheckBox("log y")
        self.log_box.setToolTip("Logarithmic y axis on the loss and gradient-norm plots")
        self.smooth_box = QCheckBox("smooth")
        self.smooth_box.setToolTip("Exponential moving average as TensorBoard smooths (weight on "
                                   "the slider); the raw curve stays, faded")
        self.smooth_slider = QSlider(Qt.Horizontal)  # TensorBoard's 0 … 0.999, in thousandths
        self.smooth_slider.setRange(0, 999)
        self.smooth_slider.setValue(round(SMOOTHING * 1000))
        self.smooth_slider.setMaximumWidth(140)
        self.smooth_slider.setToolTip("smoothing weight")
        self.smooth_label = QLabel(f"{SMOOTHING:.3f}")
        self.csv_button = QPushButton("CSV…")
        self.csv_button.setToolTip("Save the loss and gradient-norm curves (every step, raw) as CSV")
        self.csv_button.clicked.connect(self.save_csv)
        self.readout = ReadoutLabel()  # asks for no width: the docks stay as they are
        self.log_box.toggled.connect(self.set_log)
        self.smooth_box.toggled.connect(lambda _on: self.refresh())
        self.smooth_slider.valueChanged.connect(self.set_smoothing)
        for plot in (self.loss_plot, self.norm_plot):  # pyqtgraph's own menu stays in step
            plot.ctrl.logYCheck.toggled.connect(self.log_box.setChecked)
        header = QHBoxLayout()
        header.setContentsMargins(4, 0, 4, 0)
        header.addWidget(self.log_box)
        header.addWidget(self.smooth_box)
        header.addWidget(self.smooth_slider)
        header.addWidget(self.smooth_label)
        header.addWidget(self.x_box)
        header.addWidget(self.readout, 1)
        header.addWidget(self.csv_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addLayout(header)
        layout.addWidget(self.key)
        self.plots.setMinimumHeight(PLOTS_LEAST)  # readable plots: a short dock scrolls them
        self.scroll = QScrollArea(widgetResizable=True, frameShape=QFrame.NoFrame)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.scroll.setWidget(self.plots)
        layout.addWidget(self.scroll, 1)
        self.hover = HoverReadout(self.plots.scene(), [self.loss_plot, self.norm_plot],
                                  self.describe_point, self.readout.setText)
        self.plots.scene().sigMouseClicked.connect(self._clicked)

    def comfortable_height(self) -> int:
        """The height that shows the toggles, two lines of key and the plots whole."""
        key = self.key.fontMetrics().lineSpacing() * KEY_LINES + 4
        return self.layout().itemAt(0).sizeHint().height() + key + PLOTS_LEAST + 2

    def _clicked(self, event) -> None:
        """A left click in a plot that no item took (a spike marker takes its own): its step."""
        if event.button() != Qt.LeftButton or event.isAccepted():
            return
        for plot in (self.loss_plot, self.norm_plot):
            if plot.vb.sceneBoundingRect().contains(event.scenePos()):
                step = self.step_near(plot, plot.vb.mapSceneToView(event.scenePos()).x())
                if step is not None:
                    self.step_clicked.emit(step)
                return

    def step_near(self, plot: pg.PlotItem, x: float) -> int | None:
        """The step of the own run's point nearest ``x`` (in the x axis' units), or None."""
        curve = self.timeline.loss if plot is self.loss_plot else self.timeline.norm
        index = nearest_point(self.overlay.x_of(self.overlay.runs[0], curve.x), curve.y, x)
        return None if index is None else int(curve.x[index])

    @staticmethod
    def _curves(plot: pg.PlotItem, colour: str) -> tuple[pg.PlotDataItem, pg.PlotDataItem]:
        """The raw curve (faded while smoothing) and the curve shown on top."""
        plot.showGrid(x=True, y=True, alpha=0.2)
        plot.disableAutoRange()
        steady_axes(plot, steps=True)
        faded = pg.mkColor(colour)
        faded.setAlpha(70)
        items = (plot.plot(pen=pg.mkPen(faded, width=1)),
                 plot.plot(pen=pg.mkPen(colour, width=1.5), symbol=None, symbolSize=6,
                           symbolBrush=colour, symbolPen=None))
        for item in items:
            item.setDownsampling(auto=True, method="peak")
            item.setClipToView(True)
        return items

    def set_log(self, log: bool) -> None:
        """Logarithmic (True) or linear y axes on both plots."""
        self.log_box.setChecked(log)
        for plot in (self.loss_plot, self.norm_plot):
            plot.setLogMode(y=log)
        self.refresh()

    def save_csv(self) -> str | None:
        """Ask for a file and write ``step, loss, global_norm`` (as applied: what the optimizer
        used) of every step shown, exactly as recorded; where a run clips or scales, its norm as
        accumulated beside it (``grad_norm_accumulated``: ``.grad`` after backward, before
        unscale and clip; the curve is it ÷ ``scale``, a column where a GradScaler was used).
        With runs overlaid, one row per shown run and step, its name in a ``run`` column (long
        form, as pandas reads it)."""
        from gradexplorer.gui.csv_export import save_csv

        overlay = self.overlay
        runs = overlay.shown() if overlay.overlaid else [overlay.runs[0]]
        extra = ["grad_norm_accumulated"] if any(r.source.clips_or_scales() for r in runs) else []
        if extra and any(np.isfinite(r.source.figure("scale")[1]).any() for r in runs):
            extra.append("scale")
        rows = []
        for run in runs:
            steps, losses = run.source.figure("loss")
            columns = [dict(zip(*(v.tolist() for v in run.source.figure(f)), strict=True))
                       for f in ("global_norm", *extra)]
            name = (run.name,) if overlay.overlaid else ()
            rows += [(*name, int(step), loss, *(c.get(step) for c in columns))
                     for step, loss in zip(steps.tolist(), losses.tolist(), strict=True)]
        header = ["run"] * overlay.overlaid + ["step", "loss", "global_norm", *extra]
        return save_csv(self, "curves", header, rows)

    @property
    def smoothing(self) -> float:
        """The smoothing weight on the slider (0 … 0.999)."""
        return self.smooth_slider.value() / 1000

    def set_smoothing(self, value: int) -> None:
        """Slider moved: show the weight; smooth with it (moving it turns smoothing on)."""
        self.smooth_label.setText(f"{value / 1000:.3f}")
        if not self.smooth_box.isChecked():
            self.smooth_box.setChecked(True)  # refreshes
        else:
            self.refresh()

    def refresh(self) -> None:
        """Show the timeline's current curves and the overlaid runs' (one range change per
        plot, not one per item; every visible run on the same scales)."""
        t, smooth, overlay = self.timeline, self.smooth_box.isChecked(), self.overlay
        own, mode = overlay.runs[0], overlay.x_mode
        if self.x_box.currentData() != mode:
            self.x_box.setCurrentIndex(self.x_box.findData(mode))
        for figure, plot, raw, item, lines, curve in (
                ("loss", self.loss_plot, self.loss_raw, self.loss_item, self.loss_lines, t.loss),
                ("headline_norm", self.norm_plot, self.norm_raw, self.norm_item, self.norm_lines, t.norm)):
            set_x_axis(plot, mode, X_LABELS[mode] if mode != "step" else "")  # a step: no label
            x = overlay.x_of(own, curve.x) if own.visible else np.zeros(0)
            y = curve.y if own.visible else np.zeros(0)
            colour = own.colour if overlay.overlaid else PLOT_PENS["loss" if figure == "loss" else "norm"]
            item.setPen(pg.mkPen(colour, width=2.2 if overlay.overlaid and overlay.reference == 0 else 1.5))
            raw.setData(x, y, connect="finite") if smooth else raw.setData([], [])
            item.setData(x, ema(y, self.smoothing) if smooth else y, connect="finite")
            item.setSymbol("o" if len(x) == 1 else None)  # one step is a point, not yet a line
            others = [Line(r.name, r.colour, *self._smoothed(overlay.curve(r, figure), smooth),
                           r is overlay.runs[overlay.reference])
                      for r in overlay.shown() if r is not own]
            extra, named = [(item, own.name)] if own.visible and others else [], figure == "loss"
            if figure == "headline_norm":  # named only where the applied norm is drawn too
                applied = self._applied(own, smooth, colour)
                if applied is not None:
                    extra = [(item, f"{own.name}: " * bool(others) + ACCUMULATED_NAME),
                             (self.applied_item, APPLIED_NAME)]
                    others.append(Line("", colour, *applied))  # in the shared range
                    named = True
            lines.show([ln for ln in others if ln.name], extra, named)
            xs, ys = [x, *(ln.x for ln in others)], [y, *(ln.y for ln in others)]
            value_ticks(plot, any(len(v) for v in xs))
            shared_range(plot, xs, ys, log=self.log_box.isChecked(), wall=mode == "wall time")

    def _applied(self, own, smooth: bool, colour: str) -> tuple[np.ndarray, np.ndarray] | None:
        """Draw the own run's norm as applied where it clips or scales (else hide it); its
        ``(x, y)`` as drawn, or None."""
        t, shown = self.timeline, own.visible and self.timeline.clips_or_scales
        self.applied_item.setVisible(shown)
        if not shown:
            self.applied_item.setData([], [])
            return None
        x, y = self.overlay.x_of(own, t.applied.x), t.applied.y
        y = ema(y, self.smoothing) if smooth else y
        self.applied_item.setPen(pg.mkPen(colour, width=1, style=Qt.DashLine))
        self.applied_item.setData(x, y, connect="finite")
        return x, y

    def _smoothed(self, xy: tuple[np.ndarray, np.ndarray], smooth: bool) -> tuple[np.ndarray, np.ndarray]:
        x, y = xy
        return x, ema(y, self.smoothing) if smooth else y

    def describe_point(self, plot: pg.PlotItem, x: float, _y: float) -> str:
        """``step N · loss V`` for the step nearest the mouse (smoothed value too when on)."""
        curve = self.timeline.loss if plot is self.loss_plot else self.timeline.norm
        index = nearest_point(self.overlay.x_of(self.overlay.runs[0], curve.x), curve.y, x)
        if index is None:
            return ""
        name = "loss" if plot is self.loss_plot else "gradient norm" + \
            (f" ({ACCUMULATED_NAME})" if self.timeline.clips_or_scales else "")
        text = f"step {int(curve.x[index])} · {name} {format_number(float(curve.y[index]))}"
        if self.smooth_box.isChecked():
            text += f" (smoothed {format_number(float(ema(curve.y, self.smoothing)[index]))})"
        return text


def ema(y: np.ndarray, weight: float = SMOOTHING) -> np.ndarray:
    """TensorBoard's debiased moving average (core ``ema_smooth``) with non-finite points left
    as gaps (NaN) in the drawn curve."""
    y = np.asarray(y, dtype=np.float64)
    out = ema_smooth(y, weight)
    out[~np.isfinite(y)] = np.nan
    return out


def fit_range(plot: pg.PlotItem, x: np.ndarray, y: np.ndarray, log: bool = False) -> None:
    """Set both axis ranges at once, with a little padding (NaN and, for log, ≤0 ignored)."""
    finite = np.isfinite(y) & ((y > 0) if log else True)
    if not finite.any():
        return
    values = np.log10(y[finite]) if log else y[finite]
    plot.vb.setRange(xRange=(float(x[0]), nice_ceiling(float(x[-1]) + 0.5)),
                     yRange=padded_range(float(values.min()), float(values.max()), log),
                     padding=0, update=True)


def nice_ceiling(value: float) -> float:
    """The smallest "round" number (1, 1.5, 2, 3, 4, 5, 6 or 8 × 10^k) at or above ``value``,
    so that the x axis, and its tick labels, change only now and then."""
    if value <= 1:
        return 1.0
    scale = 10.0 ** math.floor(math.log10(value))
    return next(m * scale for m in (1, 1.5, 2, 3, 4, 5, 6, 8, 10) if m * scale >= value)
