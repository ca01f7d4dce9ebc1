"""Loss and global gradient-norm curves over steps."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtWidgets import QWidget

from gradexplorer.gui.theme import PLOT_PENS
from gradexplorer.gui.timeline import Timeline


class TrainingCurves(pg.GraphicsLayoutWidget):
    """Two x-linked plots; ``refresh`` pushes the timeline's data into the existing items."""

    def __init__(self, timeline: Timeline, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.timeline = timeline
        self.loss_plot = self.addPlot(row=0, col=0, title="loss")
        self.norm_plot = self.addPlot(row=1, col=0, title="global gradient norm")
        self.norm_plot.setXLink(self.loss_plot)
        self.norm_plot.setLabel("bottom", "step")
        self.loss_item = self._curve(self.loss_plot, PLOT_PENS["loss"])
        self.norm_item = self._curve(self.norm_plot, PLOT_PENS["norm"])

    @staticmethod
    def _curve(plot: pg.PlotItem, colour: str) -> pg.PlotDataItem:
        plot.showGrid(x=True, y=True, alpha=0.2)
        item = plot.plot(pen=pg.mkPen(colour, width=1.5))
        item.setClipToView(True)
        item.setDownsampling(auto=True, method="peak")
        return item

    def refresh(self, _update=None) -> None:
        """Show the timeline's current curves."""
        t = self.timeline
        self.loss_item.setData(t.loss.x, t.loss.y, connect="finite")
        self.norm_item.setData(t.norm.x, t.norm.y, connect="finite")

    def set_log_norm(self, log: bool) -> None:
        """Logarithmic y axis for the gradient norm."""
        self.norm_plot.setLogMode(y=log)
