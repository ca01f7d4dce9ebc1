"""One parameter's histogram over time: a heat map of value bins × steps."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF
from PySide6.QtWidgets import QWidget

from gradexplorer.gui.theme import ALARM, steady_axes


class HistogramHeatmap(pg.PlotWidget):
    """An ImageItem re-fed with ``setImage``; x is the step, y the gradient value."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.log = True
        self.plotItem.setTitle("histogram over steps")
        self.plotItem.setLabel("bottom", "step")
        self.plotItem.setLabel("left", "gradient value")
        steady_axes(self.plotItem)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.image.setColorMap(pg.colormap.get("viridis"))
        self.addItem(self.image)
        self.note = pg.TextItem("", anchor=(0.5, 0.5), color=ALARM)
        self.addItem(self.note, ignoreBounds=True)
        self.has_data = False

    def set_log(self, log: bool) -> None:
        """Colour by log10(1 + count) or by count."""
        self.log = log

    def show_matrix(self, name: str | None, matrix) -> None:
        """Draw a HistogramMatrix (rows are steps); empty when there is none."""
        self.plotItem.setTitle(f"histogram over steps · {name}" if name else "histogram over steps")
        if matrix is None or not len(matrix.steps):
            self.image.clear()
            self.has_data = False
            self._show_note("no gradient recorded yet" if name else "select a parameter")
            return
        self._show_note("")
        edges, counts = matrix.on_common_grid()
        shown = np.log10(1.0 + counts) if self.log else counts.astype(float)
        steps = matrix.steps
        span = float(steps[-1] - steps[0]) + (float(np.median(np.diff(steps))) if len(steps) > 1 else 1.0)
        self.image.setImage(shown.T, autoLevels=True)  # rows: value bins, columns: steps
        height = float(edges[-1] - edges[0]) or 1.0
        self.image.setRect(QRectF(float(steps[0]), float(edges[0]), span, height))
        self.has_data = True

    def _show_note(self, text: str) -> None:
        """A centred note in place of the image (hidden when empty)."""
        if text == self.note.toPlainText():
            return
        self.note.setText(text)
        if text:  # a fixed frame for the note (this turns auto-range off) ...
            self.plotItem.vb.setRange(xRange=(0, 1), yRange=(0, 1), padding=0)
            self.note.setPos(0.5, 0.5)
        else:  # ... and back to following the image
            self.plotItem.vb.enableAutoRange()
