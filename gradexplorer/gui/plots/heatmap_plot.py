"""One parameter's histogram over time: a heat map of value bins × steps, on a fixed value axis,
each step on its own range, or on log10 |g| (``heatmap_axes``)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QWidget

from gradexplorer.core.share.colours import VIRIDIS
from gradexplorer.gui.graph.tint import NONFINITE
from gradexplorer.gui.plots.axes import ReadableAxis
from gradexplorer.gui.plots.heatmap_axes import heatmap_rows
from gradexplorer.gui.plots.histogram_plot import NamedTitle
from gradexplorer.gui.plots.hover import HoverReadout, corner_readout
from gradexplorer.gui.text.number_text import format_number
from gradexplorer.gui.theme import ALARM, PLOT_COLOURS, SELECTION, current_theme, steady_axes, value_ticks


def bar_axis(bar: pg.ColorBarItem, label: str) -> None:
    """The colour bar's labelled side (its left frame axis) as a ReadableAxis, so that its label
    fits a short plot like every axis label (``plots/axis_label.py``)."""
    axis = ReadableAxis("left")
    bar.setAxisItems({"left": axis})
    axis.setZValue(0.5)
    axis.setTicks([])
    axis.setStyle(showValues=False)
    axis.setLabel(label)


def unbinned_steps(matrix) -> np.ndarray:
    """Per step: True where every value was NaN/Inf, so nothing was binned (its counts say 0,
    which would read as "no values")."""
    if matrix.nonfinite is None:
        return np.zeros(len(matrix.steps), dtype=bool)
    return (np.asarray(matrix.nonfinite) > 0) & ~np.asarray(matrix.counts).any(axis=1)


def unbinned_marks(plot: pg.PlotWidget) -> tuple[pg.BarGraphItem, pg.LegendItem]:
    """The violet columns of steps not binned (NaN/Inf) and their key, both hidden until used."""
    violet = QColor.fromRgba(NONFINITE)
    bars = pg.BarGraphItem(x0=[], y0=0.0, width=1.0, height=1.0, brush=violet, pen=None)
    bars.setZValue(5)
    plot.addItem(bars, ignoreBounds=True)
    key = pg.LegendItem(labelTextSize="8pt")  # in the title's row, right: never over the image
    key.setParentItem(plot.plotItem)  # (inside the view box it hid the steps from 27 on)
    key.anchor(itemPos=(1, 0), parentPos=(1, 0), offset=(-4, 0))
    key.addItem(bars, "NaN/Inf: not binned")
    key.items[0][0].setAcceptedMouseButtons(Qt.NoButton)  # a click on it hid the marks
    key.layout.setContentsMargins(2, 0, 4, 0)  # compact: it lies over the image
    bars.setVisible(False)
    key.setVisible(False)
    return bars, key


MAX_COLUMNS = 4096  # image columns drawn for unevenly spaced steps


def step_columns(steps: np.ndarray) -> tuple[np.ndarray | None, float]:
    """``(rows, pitch)``: the image is drawn in columns ``pitch`` steps wide from the first
    step; ``rows`` (None where the steps are evenly spaced: one column each) gives, for each
    column, the row of the step held nearest its centre — so that unevenly spaced steps (a live
    history thinned to every 8th step and its newest two, a run read at rounded intervals)
    sit under their own numbers, as the readout under the mouse finds them."""
    if len(steps) < 2:
        return None, 1.0
    gaps = np.diff(steps).astype(float)
    if (gaps == gaps[0]).all():
        return None, float(gaps[0])
    span = float(steps[-1] - steps[0])
    count = min(round(span / gaps.min()), MAX_COLUMNS - 1)  # columns after the first
    pitch = span / count  # the last column centred on the last step
    centres = steps[0] + pitch * np.arange(count + 1)
    right = np.clip(np.searchsorted(steps, centres), 1, len(steps) - 1)
    nearer_left = centres - steps[right - 1] <= steps[right] - centres
    return np.where(nearer_left, right - 1, right), pitch


class HistogramHeatmap(NamedTitle, pg.PlotWidget):
    """An ImageItem re-fed with ``setImage``; x is the step, y the gradient value. A click on
    a column: ``step_clicked(step)`` (the step drawn there); ``mark_step`` draws a line at the
    step the window shows."""

    step_clicked = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.log = True
        self.axis_mode = "fixed"  # or "per step", "log |g|" (heatmap_axes.AXIS_MODES)
        self.drawn = None  # (name, HistogramMatrix) shown, redrawn when the axis changes
        self.matrix = None  # the HistogramMatrix drawn now (each step's own bins, for the readout)
        self.set_named_title("histogram over steps", None)
        self.plotItem.setLabel("bottom", "step")
        self.plotItem.setLabel("left", "gradient value")
        steady_axes(self.plotItem, steps=True)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.addItem(self.image)
        viridis = pg.ColorMap(np.linspace(0, 1, len(VIRIDIS)), VIRIDIS)  # the report's map too
        self.colour_bar = pg.ColorBarItem(colorMap=viridis, interactive=False,
                                          values=(0, 1), width=12, label=self._bar_label())
        self.colour_bar.setImageItem(self.image, insert_in=self.plotItem)
        bar_axis(self.colour_bar, self._bar_label())
        self.readout, self.show_readout = corner_readout(self)  # what is under the mouse
        self.shown = None  # (edges, steps, counts) drawn now, for the hover readout
        self.hover = HoverReadout(self.scene(), [self.plotItem],
                                  lambda _plot, x, y: self.describe_cell(x, y), self.show_readout)
        self.note = pg.TextItem("", anchor=(0.5, 0.5), color=ALARM)
        self.addItem(self.note, ignoreBounds=True)
        self.has_data = False
        self.unbinned, self.unbinned_key = unbinned_marks(self)
        self.step_line = pg.InfiniteLine(angle=90, pen=pg.mkPen(SELECTION, width=1.5))
        self.step_line.setZValue(6)
        self.step_line.setVisible(False)
        self.addItem(self.step_line, ignoreBounds=True)
        self.marked: int | None = None  # the step the line marks (None: live, no line)
        self.scene().sigMouseClicked.connect(self._clicked)

    def step_at(self, x: float) -> int | None:
        """The step drawn in the column under ``x`` (a view coordinate), or None."""
        if self.shown is None:
            return None
        steps = self.shown[1]
        return int(steps[int(np.argmin(np.abs(steps - x)))])

    def _clicked(self, event) -> None:
        vb = self.plotItem.vb
        if event.button() != Qt.LeftButton or not vb.sceneBoundingRect().contains(event.scenePos()):
            return
        step = self.step_at(vb.mapSceneToView(event.scenePos()).x())
        if step is not None:
            self.step_clicked.emit(step)

    def mark_step(self, step: int | None) -> None:
        """A line at ``step`` (None: none: live)."""
        self.marked = step
        self.step_line.setVisible(step is not None and self.has_data)
        if step is not None:
            self.step_line.setValue(step)

    def set_log(self, log: bool) -> None:
        """Colour by log10(1 + count) or by count."""
        self.log = log
        self.colour_bar.getAxis("left").setLabel(self._bar_label())

    def set_axis_mode(self, mode: str) -> None:
        """The value axis: ``fixed``, ``per step`` (each step on its own range) or ``log |g|``."""
        self.axis_mode = mode
        if self.drawn is not None:
            self.show_matrix(*self.drawn)

    def _bar_label(self) -> str:
        return "log10(1 + count)" if self.log else "count"

    def describe_cell(self, x: float, y: float) -> str:
        """``step S · [lo, hi): N values`` under the mouse: the bin that step recorded, with its
        own edges and whole count, for the gradient value under the mouse (the image
        redistributes every step onto one common grid). On the log |g| axis, where a row holds
        both signs: the row's |g| range and its count, named as rebinned when not whole. A step
        with NaN/Inf values adds how many were not binned; one with no finite value at all
        reads ``step S: not binned (NaN/Inf) · N values``, never as a step without values."""
        if self.shown is None or self.matrix is None:
            return ""
        rows, steps, counts = self.shown
        if not (rows.rows[0] <= y <= rows.rows[-1]):
            return ""
        row = int(np.argmin(np.abs(steps - x)))  # columns are centred on their steps
        step = f"step {int(steps[row])}"
        apart = 0 if self.matrix.nonfinite is None else int(self.matrix.nonfinite[row])
        if apart and not self.matrix.counts[row].any():  # nothing binned: unknown, not 0
            return f"{step}: not binned (NaN/Inf) · {apart:,} values"
        more = f" · +{apart:,} NaN/Inf not binned" if apart else ""
        return self._describe_bin(row, y, step, rows, counts) + more

    def _describe_bin(self, row: int, y: float, step: str, rows, counts) -> str:
        if self.axis_mode == "log |g|":
            col = min(int(np.searchsorted(rows.rows, y, side="right")) - 1, counts.shape[1] - 1)
            lo, hi = (rows.value_at(row, rows.rows[c], self.axis_mode) for c in (col, col + 1))
            count = float(counts[row, col])
            text = f"{int(count):,} values" if count == int(count) else \
                f"{format_number(count)} values (rebinned onto |g|)"
            return f"{step} · |g| in [{format_number(lo)}, {format_number(hi)}): {text}"
        value = rows.value_at(row, y, self.axis_mode)
        own, recorded = self.matrix.edges[row], self.matrix.counts[row]
        if not own[0] <= value <= own[-1]:
            return f"{step} · no values here (its range [{format_number(own[0])}, " \
                   f"{format_number(own[-1])}])"
        col = min(int(np.searchsorted(own, value, side="right")) - 1, len(recorded) - 1)
        return (f"{step} · [{format_number(own[col])}, {format_number(own[col + 1])}): "
                f"{int(recorded[col]):,} values")

    def show_matrix(self, name: str | None, matrix) -> None:
        """Draw a HistogramMatrix (rows are steps); empty when there is none."""
        self.set_named_title("histogram over steps", name)
        self.drawn = (name, matrix)
        if matrix is None or not len(matrix.steps):
            self.image.clear()
            self.has_data, self.shown, self.matrix = False, None, None
            self.step_line.setVisible(False)
            self._mark_unbinned(np.zeros(0), 1.0, 0.0, 1.0)
            self._show_note("no gradient recorded yet" if name else "select a parameter")
            return
        self._show_note("")
        rows = heatmap_rows(matrix.edges, matrix.counts, self.axis_mode)
        edges, counts = rows.rows, rows.counts
        self.plotItem.setLabel("left", rows.label)
        shown = np.log10(1.0 + counts) if self.log else counts.astype(float)
        steps = matrix.steps
        columns, pitch = step_columns(steps)
        span = float(steps[-1] - steps[0]) + pitch  # each step's column centred on its number
        unknown = unbinned_steps(matrix)
        shown[unknown] = np.nan  # not a column of zeros: drawn see-through, marked violet
        top = float(np.nanmax(shown)) if (~unknown).any() else 0.0
        top = top or 1.0
        drawn = shown if columns is None else shown[columns]
        self.image.setImage(drawn.T, levels=(0.0, top))  # rows: value bins, columns: steps
        self.colour_bar.setLevels((0.0, top))
        self.shown = (rows, np.asarray(steps, dtype=float), counts)
        self.matrix = matrix
        height = float(edges[-1] - edges[0]) or 1.0
        self.image.setRect(QRectF(float(steps[0]) - pitch / 2, float(edges[0]), span, height))
        self._mark_unbinned(steps[unknown], pitch, float(edges[0]), height)
        self.has_data = True
        self.mark_step(self.marked)

    def _mark_unbinned(self, steps: np.ndarray, pitch: float, bottom: float, height: float) -> None:
        """Violet columns (named by the key) over the steps whose values were all NaN/Inf."""
        self.unbinned.setOpts(x0=np.asarray(steps, dtype=float) - pitch / 2, y0=bottom, width=pitch,
                              height=height)
        self.unbinned.setVisible(bool(len(steps)))
        self.unbinned_key.setVisible(bool(len(steps)))
        if len(steps):  # the title row as tall as the key: above the image, never on it
            self.plotItem.layout.setRowFixedHeight(0, max(30.0, self.unbinned_key.height() + 1))
            self.plotItem.layout.activate()
            # its box in the plot's colours (of the theme now), readable over the image
            background, ink = PLOT_COLOURS[current_theme()]
            self.unbinned_key.setBrush(background)  # (the row is back to 30 with the next title)
            for _sample, label in self.unbinned_key.items:
                label.setText(label.text, color=ink)
            self._retitle()  # left out where the key would cover it

    def _retitle(self) -> None:
        """The title, unless the "NaN/Inf: not binned" key at the right of its row would cover
        it (at 1024×700 the key hid "histogram over steps" from its eighth letter on): then the
        row holds the key alone (the dock's header names the parameter)."""
        super()._retitle()
        key = getattr(self, "unbinned_key", None)
        if key is None or not key.isVisible():
            return
        label = self.plotItem.titleLabel
        centre = self.plotItem.vb.sceneBoundingRect().center().x()
        if centre + label.item.boundingRect().width() / 2 + 6 > key.sceneBoundingRect().left():
            label.setText("")

    def _show_note(self, text: str) -> None:
        """A centred note in place of the image (hidden when empty)."""
        if text == self.note.toPlainText():
            return
        self.note.setText(text)
        self.wrap_note()
        value_ticks(self.plotItem, not text)
        if text:  # a fixed frame for the note (this turns auto-range off) ...
            self.plotItem.vb.setRange(xRange=(0, 1), yRange=(0, 1), padding=0)
            self.note.setPos(0.5, 0.5)
        else:  # ... and back to following the image
            self.plotItem.vb.enableAutoRange()
