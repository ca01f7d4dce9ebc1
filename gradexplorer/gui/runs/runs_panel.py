"""The "Runs" dock: the run selector (show or hide each overlaid run, pick the reference run,
add or remove runs) above the selected parameter's figure over every shown run."""

from __future__ import annotations

from collections.abc import Callable

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QIcon, QPixmap
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from gradexplorer.core.stats.records import STAT_LABELS
from gradexplorer.gui.models.run_overlay import X_LABELS, RunOverlay
from gradexplorer.gui.plots.histogram_plot import NamedTitle
from gradexplorer.gui.plots.legend_row import LegendRow
from gradexplorer.gui.plots.overlay_lines import Line, OverlayLines, set_x_axis, shared_range
from gradexplorer.gui.theme import steady_axes
from gradexplorer.gui.throttle import throttled

PARAM_FIGURES = ("norm", "abs_max", "std", "mean", "update_ratio", "zero_fraction")
REDRAW_MS = 200


def swatch(colour: str, size: int = 12) -> QIcon:
    """A square of ``colour``: the run's colour in the selector."""
    pixmap = QPixmap(size, size)
    pixmap.fill(QColor(colour))
    return QIcon(pixmap)


class FigurePlot(NamedTitle, pg.PlotWidget):
    """A plot titled ``figure · parameter`` (the name shortened to the plot's width)."""


class RunSelector(QWidget):
    """A row per overlaid run: a check box (shown), its colour and name, a reference button.
    ``add_requested()`` when "Add run…" is pressed."""

    add_requested = Signal()

    def __init__(self, overlay: RunOverlay, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.overlay = overlay
        self.table = QTableWidget(0, 2)
        self.table.setHorizontalHeaderLabels(["run", ""])
        self.table.verticalHeader().hide()
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.Stretch)
        header.setSectionResizeMode(1, QHeaderView.ResizeToContents)
        self.table.setSelectionBehavior(QTableWidget.SelectRows)
        self.table.setSelectionMode(QTableWidget.SingleSelection)
        self.table.setToolTip("tick to show a run; the reference run is drawn in full and on top, "
                              "and the Gradients dock's heat map shows it")
        self.table.itemChanged.connect(self._ticked)
        self.table.cellClicked.connect(self._clicked)
        self.add_button = QPushButton("Add run…")
        self.add_button.setToolTip("overlay another run directory written by gradexplorer.watch")
        self.add_button.clicked.connect(self.add_requested)
        self.remove_button = QPushButton("Remove")
        self.remove_button.setToolTip("stop overlaying the selected run (the window's own stays)")
        self.remove_button.clicked.connect(self.remove_selected)
        buttons = QHBoxLayout()
        buttons.setContentsMargins(0, 0, 0, 0)
        buttons.addWidget(self.add_button)
        buttons.addWidget(self.remove_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(self.table, 1)
        layout.addLayout(buttons)
        overlay.changed.connect(self.show_runs)
        self.show_runs()

    def show_runs(self) -> None:
        """One row per run of the overlay, as it is now."""
        runs = self.overlay.runs
        self.table.blockSignals(True)
        self.table.setRowCount(len(runs))
        for row, run in enumerate(runs):
            item = QTableWidgetItem(swatch(run.colour), run.name)
            item.setFlags(Qt.ItemIsEnabled | Qt.ItemIsSelectable | Qt.ItemIsUserCheckable)
            item.setCheckState(Qt.Checked if run.visible else Qt.Unchecked)
            item.setToolTip(str(run.path) if run.path is not None else run.name)
            self.table.setItem(row, 0, item)
            is_reference = row == self.overlay.reference  # a star, not a radio button: seen in
            mark = QTableWidgetItem("★ reference" if is_reference else "☆")  # every theme
            mark.setFlags(Qt.ItemIsEnabled)
            mark.setTextAlignment(Qt.AlignCenter)
            mark.setToolTip("the reference run" if is_reference else "click: make this the reference run")
            self.table.setItem(row, 1, mark)
        self.table.blockSignals(False)
        self.remove_button.setEnabled(len(runs) > 1)
        frame = self.table.horizontalHeader().sizeHint().height() + 2 * self.table.frameWidth() + 2
        rows = [self.table.rowHeight(r) for r in range(len(runs))]
        self.table.setMaximumHeight(frame + sum(rows))  # no empty rows below the runs; in a short
        self.table.setMinimumHeight(frame + max(rows or [0]))  # window one row, and a scroll bar

    def _ticked(self, item: QTableWidgetItem) -> None:
        if item.column() == 0:
            self.overlay.set_visible(item.row(), item.checkState() == Qt.Checked)

    def _clicked(self, row: int, column: int) -> None:
        if column == 1:
            self.overlay.set_reference(row)

    def set_shown(self, row: int, shown: bool) -> None:
        """Tick or untick run ``row`` as a click on its box does."""
        self.table.item(row, 0).setCheckState(Qt.Checked if shown else Qt.Unchecked)

    def remove_selected(self) -> None:
        row = self.table.currentRow()
        if row > 0:
            self.overlay.remove(row)


class RunsPanel(QSplitter):
    """The selector (top) and the selected parameter's figure of every shown run (below)."""

    def __init__(self, overlay: RunOverlay, selection, timeline, parent: QWidget | None = None) -> None:
        super().__init__(Qt.Vertical, parent)
        self.overlay, self.selection = overlay, selection
        # nothing selected: the parameter the Gradients dock shows (run_compare sets it), not
        # an empty plot saying "select a parameter" beside a histogram of one
        self.default_param: Callable[[], str | None] = lambda: None
        self.selector = RunSelector(overlay)
        self.figure_box = QComboBox()
        for field in PARAM_FIGURES:
            self.figure_box.addItem("‖g‖" if field == "norm" else STAT_LABELS.get(field, field), field)
        self.figure_box.setToolTip("which figure of the selected parameter to overlay")
        self.figure_box.currentIndexChanged.connect(lambda _i: self.refresh())
        self.plot = FigurePlot()
        steady_axes(self.plot.plotItem)
        self.plot.plotItem.showGrid(x=True, y=True, alpha=0.2)
        self.plot.plotItem.disableAutoRange()
        self.key = LegendRow()  # over the plot, never on its curves
        self.lines = OverlayLines(self.plot.plotItem, self.key)
        right = QWidget()
        column = QVBoxLayout(right)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.figure_box, 0, Qt.AlignLeft)
        column.addWidget(self.key)
        column.addWidget(self.plot, 1)
        left = QWidget()
        left_column = QVBoxLayout(left)
        left_column.setContentsMargins(0, 0, 0, 0)
        left_column.addWidget(self.selector)
        left_column.addStretch(1)
        self.addWidget(left)
        self.addWidget(right)
        self.setStretchFactor(1, 2)
        self.setChildrenCollapsible(False)
        self.plot.setMinimumHeight(70)
        self.refresh_soon = throttled(self.refresh, timeout=REDRAW_MS, leading=False, parent=self)
        overlay.changed.connect(self.refresh_soon)
        overlay.changed.connect(self.fit_selector)
        timeline.changed.connect(self.refresh_soon)
        selection.changed.connect(lambda _s: self.refresh_soon())

    def fit_selector(self) -> None:
        """Every run's row in view when there is room; the figure takes the rest."""
        total = sum(self.sizes())
        wanted = self.widget(0).sizeHint().height()
        if total > 0:
            self.setSizes([min(wanted, total - self.plot.minimumHeight() - 30), total])

    def showEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().showEvent(event)
        self.fit_selector()

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        self.fit_selector()

    @property
    def field(self) -> str:
        return self.figure_box.currentData()

    def refresh(self) -> None:
        """Draw the selected parameter's figure of every shown run (one shared range)."""
        overlay, name = self.overlay, self.selection.current.param or self.default_param()
        set_x_axis(self.plot.plotItem, overlay.x_mode, X_LABELS[overlay.x_mode])
        label = "‖g‖" if self.field == "norm" else STAT_LABELS.get(self.field, self.field)
        self.plot.set_named_title(f"{label} over steps" if name else "select a parameter", name)
        reference = overlay.runs[overlay.reference]
        lines = [Line(r.name, r.colour, *overlay.parameter_curve(r, self.field, name), r is reference)
                 for r in overlay.shown()] if name else []
        self.lines.show(lines)
        shared_range(self.plot.plotItem, [ln.x for ln in lines], [ln.y for ln in lines],
                     wall=overlay.x_mode == "wall time")
