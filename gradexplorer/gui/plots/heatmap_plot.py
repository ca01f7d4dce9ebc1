"""One parameter's histogram over time: a heat map of value bins × steps, on a fixed value axis,
each step on its own range, or on log10 |g| (``heatmap_axes``)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF
from PySide6.QtWidgets import QWidget

from gradexplorer.gui.plots.axes import ReadableAxis
from gradexplorer.gui.plots.heatmap_axes import heatmap_rows
from gradexplorer.gui.plots.histogram_plot import NamedTitle
from gradexplorer.gui.plots.hover import HoverReadout, corner_readout
from gradexplorer.gui.text.number_text import format_number
from gradexplorer.gui.theme import ALARM, steady_axes, value_ticks


def bar_axis(bar: pg.ColorBarItem, label: str) -> None:
    """The colour bar's labelled side (its left frame axis) as a ReadableAxis, so that its label
    fits a short plot like every axis label (``plots/axis_label.py``)."""
    axis = ReadableAxis("left")
    bar.setAxisItems({"left": axis})
    axis.setZValue(0.5)
    axis.setTicks([])
    axis.setStyle(showValues=False)
    axis.setLabel(label)


class HistogramHeatmap(NamedTitle, pg.PlotWidget):
    """An ImageItem re-fed with ``setImage``; x is the step, y the gradient value."""

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
        self.colour_bar = pg.ColorBarItem(colorMap=pg.colormap.get("viridis"), interactive=False,
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
        both signs: the row's |g| range and its count, named as rebinned when not whole."""
        if self.shown is None or self.matrix is None:
            return ""
        rows, steps, counts = self.shown
        if not (rows.rows[0] <= y <= rows.rows[-1]):
            return ""
        row = int(np.argmin(np.abs(steps - x)))  # columns are centred on their steps
        step = f"step {int(steps[row])}"
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
            self._show_note("no gradient recorded yet" if name else "select a parameter")
            return
        self._show_note("")
        rows = heatmap_rows(matrix.edges, matrix.counts, self.axis_mode)
        edges, counts = rows.rows, rows.counts
        self.plotItem.setLabel("left", rows.label)
        shown = np.log10(1.0 + counts) if self.log else counts.astype(float)
        steps = matrix.steps
        pitch = float(np.median(np.diff(steps))) if len(steps) > 1 else 1.0
        span = float(steps[-1] - steps[0]) + pitch  # each step's column centred on its number
        top = float(shown.max()) or 1.0
        self.image.setImage(shown.T, levels=(0.0, top))  # rows: value bins, columns: steps
        self.colour_bar.setLevels((0.0, top))
        self.shown = (rows, np.asarray(steps, dtype=float), counts)
        self.matrix = matrix
        height = float(edges[-1] - edges[0]) or 1.0
        self.image.setRect(QRectF(float(steps[0]) - pitch / 2, float(edges[0]), span, height))
        self.has_data = True

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
