"""Other runs' distributions on the bands plot: each run's p25–p75 shaded and its median drawn
in the run's colour over the reference run's full bands, named in a legend above the plot."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyqtgraph as pg

from gradexplorer.core.stats.bands import distribution_bands
from gradexplorer.core.stats.history import HistogramMatrix
from gradexplorer.gui.plots.legend_row import LegendRow

ALPHA = 70  # the p25–p75 shade of an overlaid run


class BandsOverlay:
    """Pools of items on ``bands`` (a BandsPlot): ``show(runs)`` with ``(name, colour, x,
    matrix)`` of each other run; ``own_name`` names the reference run's median in the legend
    (``legend``, which its owner places outside the plot)."""

    def __init__(self, bands, legend: LegendRow) -> None:
        self.bands = bands
        self.items: list[tuple[pg.PlotDataItem, pg.PlotDataItem, pg.FillBetweenItem, pg.PlotDataItem]] = []
        self.legend = legend
        self.medians: dict[str, np.ndarray] = {}  # name -> the median drawn (tests, readouts)

    def _item(self, index: int):
        while len(self.items) <= index:
            lo, hi = pg.PlotDataItem(), pg.PlotDataItem()
            fill = pg.FillBetweenItem(lo, hi)
            median = pg.PlotDataItem()
            for item in (lo, hi, fill, median):
                self.bands.addItem(item)
            self.items.append((lo, hi, fill, median))
        return self.items[index]

    def show(self, runs: Sequence[tuple[str, str, np.ndarray, HistogramMatrix]],
             own_name: str | None = None) -> None:
        """Draw each run's p25–p75 and median (a run without histograms draws nothing)."""
        self.medians = {}
        named = [(self.bands.median, own_name)] if own_name else []
        drawn = 0
        for name, colour, x, matrix in runs:
            if matrix is None or not len(matrix.steps):
                continue
            lo, hi, fill, median = self._item(drawn)
            drawn += 1
            bands = distribution_bands(matrix.edges, matrix.counts)
            x = np.asarray(x, dtype=np.float64)
            ok = np.isfinite(bands["min"]) & np.isfinite(x)
            c = pg.mkColor(colour)
            for edge, key in ((lo, "p25"), (hi, "p75")):
                edge.setPen(pg.mkPen(c.red(), c.green(), c.blue(), ALPHA))
                edge.setData(x[ok], bands[key][ok])
            fill.setBrush(pg.mkBrush(c.red(), c.green(), c.blue(), ALPHA))
            median.setPen(pg.mkPen(colour, width=1.6))
            median.setData(x[ok], bands["median"][ok])
            self.medians[name] = bands["median"][ok]
            named.append((median, name))
            for item in (lo, hi, fill, median):
                item.setVisible(True)
        for group in self.items[drawn:]:
            for item in group:
                item.setVisible(False)
            for item in (group[0], group[1], group[3]):
                item.setData([], [])
        self.legend.show_entries([(name, item.opts["pen"].color().name(), False) for item, name in named])
