"""The "Distributions" dock: the selected parameter's bands over the steps above a grid of
every parameter's histogram; both follow the timeline (throttled) and the selection."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QSplitter, QWidget
from superqt.utils import qthrottled

from gradexplorer.gui.plots.bands_plot import BandsPlot
from gradexplorer.gui.plots.histogram_grid import HistogramGrid

REDRAW_MS = 200  # about 5 times a second, on its own timer


class DistributionsPanel(QSplitter):
    """Bands (top) and the small-multiples grid (bottom)."""

    def __init__(self, selection, timeline, parent: QWidget | None = None) -> None:
        super().__init__(Qt.Vertical, parent)
        self.selection, self.timeline = selection, timeline
        self.bands = BandsPlot()
        self.grid = HistogramGrid(selection, timeline)
        self.addWidget(self.bands)
        self.addWidget(self.grid)
        self.setSizes([220, 480])
        self._redraw = qthrottled(self.refresh, timeout=REDRAW_MS, leading=False, parent=self)
        timeline.changed.connect(self._redraw)
        selection.changed.connect(lambda _s: self.refresh_bands())

    def flush(self) -> None:
        """Draw now what the throttle holds back (end of a run, screenshots)."""
        self._redraw.flush()

    def refresh(self) -> None:
        self.grid.refresh()
        self.refresh_bands()

    def refresh_bands(self) -> None:
        name = self.selection.current.param
        matrix = self.timeline.gradients.histogram_matrix(name) if name else None
        self.bands.show_matrix(name, matrix)
