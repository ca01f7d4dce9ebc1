"""The "Distributions" dock: the selected parameter's bands over the steps above a grid of
every parameter's histogram; both follow the timeline (throttled) and the selection. For a run
directory the bands cover the whole run (read from it, at most BAND_STEPS steps drawn); for the
live session, the steps the history holds. With runs overlaid (``RunOverlay``) the reference run's
bands are drawn in full and every other shown run's p25–p75 and median in its colour, on the
overlay's x axis."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QSplitter, QVBoxLayout, QWidget

from gradexplorer.core.stats.curves import thin_steps
from gradexplorer.gui.models.run_overlay import X_LABELS
from gradexplorer.gui.plots.bands_overlay import BandsOverlay
from gradexplorer.gui.plots.bands_plot import BandsPlot
from gradexplorer.gui.plots.histogram_grid import HistogramGrid
from gradexplorer.gui.plots.legend_row import LegendRow
from gradexplorer.gui.plots.overlay_lines import set_x_axis
from gradexplorer.gui.throttle import throttled

REDRAW_MS = 200  # about 5 times a second, on its own timer
BAND_STEPS = 400  # steps of a whole run drawn in the bands (evenly spread, first and last kept)


class DistributionsPanel(QSplitter):
    """Bands (top) and the small-multiples grid (bottom)."""

    def __init__(self, selection, timeline, parent: QWidget | None = None, overlay=None,
                 figures=None) -> None:
        """``figures``: what the grid's tiles show (a ReferenceFigures: the reference run's;
        None: the timeline's)."""
        super().__init__(Qt.Vertical, parent)
        self.selection, self.timeline, self.overlay = selection, timeline, overlay
        self.run_history = None  # a core.watch RunHistory: a followed run's whole history
        self.bands = BandsPlot()
        self.bands_key = LegendRow()  # the runs' medians named above the bands, not over them
        self.other_bands = BandsOverlay(self.bands, self.bands_key)
        self.grid = HistogramGrid(selection, timeline if figures is None else figures)
        top = QWidget()
        column = QVBoxLayout(top)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        column.addWidget(self.bands_key)
        column.addWidget(self.bands, 1)
        self.addWidget(top)
        self.addWidget(self.grid)
        self.setSizes([220, 480])
        self._redraw = throttled(self.refresh, timeout=REDRAW_MS, leading=False, parent=self)
        timeline.changed.connect(self._redraw)
        selection.changed.connect(lambda _s: self.refresh_bands())
        if overlay is not None:
            overlay.changed.connect(self._redraw)
        if figures is not None:
            figures.changed.connect(self._redraw)

    def flush(self) -> None:
        """Draw now what the throttle holds back (end of a run, screenshots)."""
        self._redraw.flush()

    def refresh(self) -> None:
        self.grid.refresh()
        self.refresh_bands()

    def set_run(self, run) -> None:
        """Draw bands over the whole of ``run`` (a followed run directory; None: the live
        session's history)."""
        from gradexplorer.core.runs.history import RunHistory

        self.run_history = None if run is None else RunHistory(run)
        self.refresh_bands()

    def refresh_bands(self) -> None:
        name = self.selection.current.param
        overlay = self.overlay
        if overlay is not None and (overlay.overlaid or overlay.x_mode != "step"):
            self._refresh_overlaid(name)
            return
        self.other_bands.show([])
        set_x_axis(self.bands.plotItem, "step", "step")
        if not name:
            matrix = None
        elif self.run_history is not None:
            steps = thin_steps(self.run_history.run.steps, BAND_STEPS)
            matrix = self.run_history.histogram_matrix(name, steps)
        else:
            matrix = self.timeline.gradients.histogram_matrix(name)
        self.bands.show_matrix(name, matrix)

    def _refresh_overlaid(self, name: str | None) -> None:
        """The reference run's full bands, the other shown runs' p25–p75 and median."""
        overlay = self.overlay
        reference = overlay.runs[overlay.reference]
        set_x_axis(self.bands.plotItem, overlay.x_mode, X_LABELS[overlay.x_mode])
        drawn = []
        for run in overlay.shown():
            matrix = run.source.histograms(name, BAND_STEPS) if name else None
            x = overlay.x_of(run, matrix.steps) if matrix is not None else None
            drawn.append((run, x, matrix))
        ref = next(((x, m) for r, x, m in drawn if r is reference), (None, None))
        self.bands.show_matrix(name, ref[1], x=ref[0], colour=reference.colour)
        self.other_bands.show([(r.name, r.colour, x, m) for r, x, m in drawn if r is not reference],
                              reference.name if ref[1] is not None and len(drawn) > 1 else None)
