"""The parameter table: name, live gradient statistics (norm, max |g|, update ratio, NaN/Inf),
shape, numel and requires_grad; sortable, filterable by text and by module, tinted by norm."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QSortFilterProxyModel, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QStyle, QStyledItemDelegate, QTableView, QWidget

from gradexplorer.core.graph.style import format_shape
from gradexplorer.gui.graph.tint import table_tints
from gradexplorer.gui.models.selection import Selection, SelectionModel
from gradexplorer.gui.panels.column_priority import NAME_LEAST, ColumnPriority
from gradexplorer.gui.text.name_elide import elide_to_width, shared_and_shortest
from gradexplorer.gui.text.number_text import (
    WIDEST_FIGURES,
    format_number,
    gradient_number,
    update_ratio_text,
)
from gradexplorer.gui.text.optimizer_columns import (
    OPTIMIZER_COLUMNS,
    TOOLTIPS,
    optimizer_cells,
    optimizer_value,
)
from gradexplorer.gui.theme import ALARM

if TYPE_CHECKING:
    from torch import nn

TINTED_TEXT = "#17252c"
CONTENT_SAMPLE = 200  # rows looked at when sizing columns to their contents
NAME_WIDTH = 320  # the widest the name column opens at (pixels)
BASE_COLUMNS = ("Parameter", "Norm", "Max |g|", "Upd ratio", "NaN/Inf", "Shape", "Numel", "Grad")
COLUMNS = BASE_COLUMNS + OPTIMIZER_COLUMNS + ("SNR",)  # the optimizer's: hidden until asked for
OPTIM = range(len(BASE_COLUMNS), len(COLUMNS) - 1)
SNR = len(COLUMNS) - 1  # the gradient SNR (docs/noise.md): shown where the run recorded it
SNR_TIP = ("gradient SNR across the step's micro-batches or DDP ranks: |G|² / (tr(Σ) / "
           "micro-batch size); ≤ 0: the parameter's gradient is all noise at this batch size "
           "(docs/noise.md)")
LIVE = (1, 2, 3, 4)  # columns that follow the latest step
STATIC = {5: 1, 6: 2, 7: 3}  # column -> index into a row after the name
NUMBERS = (1, 2, 3, 6)  # right-aligned
HEADER_TIPS = (
    "parameter name (hover a row for it whole)",
    "L2 norm of the parameter's gradient this step (NaN/inf when the gradient holds them)",
    "largest |g|: the biggest absolute gradient element this step",
    "update ratio ‖Δθ‖/‖θ‖: how far the last optimizer step moved the weights, relative to them",
    "how many gradient elements are NaN / ±Inf (⚠) — ok when none",
    "shape of the parameter tensor", "number of elements",
    "requires_grad: whether the parameter gets a gradient at all")
PRIORITY = [0, 1, 2, 4, 3, 7, 5, 6]  # shown first in a narrow table: name, norm, max |g|, NaN/Inf


class ParameterTableModel(QAbstractTableModel):
    """Rows are ``named_parameters()``; the live columns follow the latest StepGradients."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.rows: list[tuple[str, str, int, bool]] = []
        self.shared: frozenset[str] = frozenset()  # shortened forms two names share: never shown
        self.shortest: list[str] = []  # each row's shortest form no other name shares
        self.stats: dict[str, Any] = {}
        self._live: dict[int, tuple[str, ...]] = {}  # a row's formatted live cells, once shown
        self._bad: list[bool] = []
        self._tints: list[int] = []  # ARGB per row by gradient norm (0: none)
        self.optimizer_state: dict[str, Any] = {}
        self._optim: dict[int, tuple[str, ...]] = {}  # a row's optimizer texts, once shown
        self.snr: dict[str, float | None] = {}  # by name, at the step shown

    def set_model(self, model: nn.Module) -> None:
        """Show ``model``'s parameters."""
        self.beginResetModel()
        shapes: dict[tuple, str] = {}  # thousands of parameters, a few shapes
        self.rows = [(n, shapes.get(p.shape) or shapes.setdefault(p.shape, format_shape(p.shape)),
                      p.numel(), p.requires_grad) for n, p in model.named_parameters()]
        self.shared, self.shortest = shared_and_shortest([row[0] for row in self.rows])
        self.stats = {}
        self._live = {}
        self._bad = [False] * len(self.rows)
        self._tints = [0] * len(self.rows)
        self.optimizer_state, self._optim = {}, {}
        self.endResetModel()

    def set_stats(self, params: dict[str, Any]) -> None:
        """New per-parameter statistics (ParamStats by name)."""
        self.stats = params
        self._live = {}  # written as rows are shown: a few dozen of thousands
        row_stats = [params.get(row[0]) for row in self.rows]
        self._bad = [bool(s is not None and s.nonfinite) for s in row_stats]
        self._tints = table_tints(row_stats)  # NaN/Inf rows violet, never "small"
        if self.rows:
            # from the name column: its tint follows the step too (a row that lost its gradient
            # kept the colour of the last one beside "no grad")
            self.dataChanged.emit(self.index(0, 0), self.index(len(self.rows) - 1, LIVE[-1]))

    def set_optimizer_state(self, states: dict[str, Any]) -> None:
        """The optimizer's state after the newest step (ParamOptimState by name)."""
        if states is self.optimizer_state:
            return
        self.optimizer_state = states
        self._optim = {}  # written as rows are shown (the columns are hidden until asked for)
        if self.rows:
            self.dataChanged.emit(self.index(0, OPTIM[0]), self.index(len(self.rows) - 1, OPTIM[-1]))

    def set_snr(self, snr: dict[str, float | None]) -> None:
        """Each parameter's gradient SNR at the step shown ({}: none recorded)."""
        if snr == self.snr:
            return
        self.snr = snr
        if self.rows:
            self.dataChanged.emit(self.index(0, SNR), self.index(len(self.rows) - 1, SNR))

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: N802 - Qt API
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section, orientation, role=Qt.DisplayRole):  # noqa: N802
        if orientation == Qt.Horizontal and role == Qt.DisplayRole:
            return COLUMNS[section]
        if orientation == Qt.Horizontal and role == Qt.ToolTipRole:
            return HEADER_TIPS[section] if section < len(HEADER_TIPS) else \
                SNR_TIP if section == SNR else TOOLTIPS.get(COLUMNS[section])
        return None

    def data(self, index: QModelIndex, role=Qt.DisplayRole):
        row, column = index.row(), index.column()
        if role == Qt.DisplayRole:
            if column == SNR:
                return format_number(self.snr.get(self.rows[row][0]), 3) if self.snr else ""
            if column in OPTIM:
                return self._optim_cells(row)[column - OPTIM[0]]
            if column in LIVE:
                return self._live_cells(row)[column - 1]
            name, shape, numel, requires_grad = self.rows[row]
            if column == 0:
                return name
            return (name, shape, f"{numel:,}", "yes" if requires_grad else "no")[STATIC[column]]
        if role == Qt.ToolTipRole and column == 0:
            return self.rows[row][0]
        if role == Qt.BackgroundRole and column in (0, 1) and self._tints[row]:
            return QColor.fromRgba(self._tints[row])
        if role == Qt.ForegroundRole and column in (0, 1) and self._tints[row]:
            return QColor(TINTED_TEXT)  # dark text on the pale heat or violet, in either theme
        if role == Qt.TextAlignmentRole and (column in NUMBERS or column in OPTIM or column == SNR):
            return int(Qt.AlignRight | Qt.AlignVCenter)
        if role == Qt.ForegroundRole and self._bad[row]:
            return QColor(ALARM)
        if role == Qt.UserRole:  # sort key
            return self._sort_value(row, column)
        return None

    def _live_cells(self, row: int) -> tuple[str, ...]:
        cells = self._live.get(row)
        if cells is None:
            stats = self.stats.get(self.rows[row][0])
            cells = self._live[row] = tuple(self._live_text(stats, c) for c in LIVE)
        return cells

    def _optim_cells(self, row: int) -> tuple[str, ...]:
        cells = self._optim.get(row)
        if cells is None:
            cells = self._optim[row] = optimizer_cells(self.optimizer_state.get(self.rows[row][0]))
        return cells

    @staticmethod
    def _live_text(stats: Any, column: int) -> str:
        if stats is None:
            return ""
        if not stats.has_grad:
            return "no grad" if column == 1 else ""
        if column == 1:
            return gradient_number(stats, stats.norm, 3)  # NaN/inf, never the finite part's 0
        if column == 2:
            return gradient_number(stats, stats.abs_max, 3)
        if column == 3:
            return update_ratio_text(stats.update_ratio, 3)
        bad = (stats.nan_count or 0) + (stats.inf_count or 0)
        return f"⚠ {stats.nan_count}/{stats.inf_count}" if bad else "ok"

    def _sort_value(self, row: int, column: int):
        name, shape, numel, requires_grad = self.rows[row]
        stats = self.stats.get(name)
        if column == SNR:
            value = self.snr.get(name)
            return -math.inf if value is None or value != value else value
        if column in OPTIM:
            return optimizer_value(self.optimizer_state.get(name), column - OPTIM[0])
        if column in LIVE:
            if stats is None or not stats.has_grad:
                return -1.0
            bad = (stats.nan_count or 0) + (stats.inf_count or 0)
            if bad and column in (1, 2):
                return math.inf  # a NaN/Inf gradient sorts as the largest
            value = (stats.norm, stats.abs_max, stats.update_ratio, bad)[column - 1]
            return -1.0 if value is None else value
        return (name, shape, numel, requires_grad)[STATIC.get(column, 0)]

    def row_of(self, name: str) -> int:
        """Row of parameter ``name`` or -1."""
        return next((i for i, row in enumerate(self.rows) if row[0] == name), -1)


class ParameterFilter(QSortFilterProxyModel):
    """Rows whose name contains ``text`` and that lie under module ``subtree`` ("" : all)."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.text = ""
        self.subtree = ""

    def set_filter(self, text: str | None = None, subtree: str | None = None) -> None:
        """Change either part of the filter (None keeps it; the same filter is not applied
        again: every selection sets the subtree, and a pass asks Python about every row)."""
        if (text is None or text.strip().lower() == self.text) and (
                subtree is None or subtree == self.subtree):
            return
        begin = getattr(self, "beginFilterChange", None)  # Qt 6.9+; invalidateFilter before
        if begin is not None:
            begin()
        if text is not None:
            self.text = text.strip().lower()
        if subtree is not None:
            self.subtree = subtree
        if begin is not None:
            self.endFilterChange()
        else:
            self.invalidateFilter()

    def filterAcceptsRow(self, row: int, parent: QModelIndex) -> bool:  # noqa: N802 - Qt API
        name = self.sourceModel().rows[row][0]
        if self.subtree and not name.startswith(self.subtree + "."):
            return False
        return self.text in name.lower()


class NameDelegate(QStyledItemDelegate):
    """Draws a dotted name shortened by whole components (``…h.10.attn.c_attn.weight``), never
    to a form another parameter shares (``h.0…weight``); the tooltip has it whole."""

    def __init__(self, table: ParameterTableModel, parent=None) -> None:
        super().__init__(parent)
        self.table = table

    def initStyleOption(self, option, index) -> None:  # noqa: N802 - Qt API
        super().initStyleOption(option, index)
        if option.text:
            style = option.widget.style() if option.widget is not None else None
            margin = style.pixelMetric(QStyle.PM_FocusFrameHMargin, None, option.widget) + 1 if style else 3
            room = option.rect.width() - 2 * margin  # as the style lays the text out: no pixel lost
            option.text = elide_to_width(option.text, option.fontMetrics.horizontalAdvance, room,
                                         self.table.shared)


class ParameterTable(QTableView):
    """The table view; clicking a row selects that parameter everywhere."""

    def fit_columns(self) -> None:
        """Size the columns once per model: static ones to their contents, live ones to a
        typical figure (resizing while steps arrive would stall the GUI thread).

        Widths come from font metrics of the headers and the first ``CONTENT_SAMPLE`` rows (Qt's
        resize-to-contents asked the model for every cell: seconds on 4,000 parameters); the name
        column fits the longest name up to ``NAME_WIDTH`` and elides the rest (tooltips show it).
        """
        metrics = self.fontMetrics()
        bold = self.horizontalHeader().fontMetrics()
        model, rows = self.table, range(min(CONTENT_SAMPLE, len(self.table.rows)))
        widths = {}
        for column, title in enumerate(COLUMNS):
            if column in LIVE or column in OPTIM or column == SNR:
                texts = list(WIDEST_FIGURES)  # format_number(value, 3) at its widest
            elif column == 0:
                texts = [max((row[0] for row in model.rows), key=len, default="")]
            else:
                texts = [str(model.data(model.index(r, column))) for r in rows]
            # the header's padding (6 px a side) and a little for its sort arrow; a cell's text margins
            width = max([bold.horizontalAdvance(title) + 18]
                        + [metrics.horizontalAdvance(t) + 8 for t in texts])
            widths[column] = min(NAME_WIDTH, width + 8) if column == 0 else width
        # the name column never narrower than the names' shortest distinct forms (up to NAME_WIDTH):
        # the figures beyond it a sideways scroll away, rather than names cut to read alike
        distinct = max(map(metrics.horizontalAdvance, model.shortest), default=0)
        self.columns.name_least = min(NAME_WIDTH, max(NAME_LEAST, distinct + 8))  # text margins
        self.columns.remember(widths)  # the name, norm and max |g| in view where they fit

    def show_optimizer_columns(self, show: bool = True) -> None:
        """Show or hide the optimizer's columns (lr, ‖m‖, RMS √v̂, eff. lr, ‖momentum‖)."""
        for column in OPTIM:
            self.setColumnHidden(column, not show)

    def show_snr(self, snr: dict[str, float | None]) -> None:
        """Each parameter's gradient SNR at the step shown, its column shown only with one."""
        self.table.set_snr(snr)
        if self.isColumnHidden(SNR) == bool(snr):
            self.setColumnHidden(SNR, not snr)
    def __init__(self, selection: SelectionModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.selection = selection
        self.table = ParameterTableModel(self)
        self.proxy = ParameterFilter(self)
        self.proxy.setSourceModel(self.table)
        self.proxy.setSortRole(Qt.UserRole)
        self.setModel(self.proxy)
        self.show_optimizer_columns(False)
        self.setColumnHidden(SNR, True)
        self.setSortingEnabled(True)
        self.sortByColumn(-1, Qt.AscendingOrder)
        self.setAlternatingRowColors(True)
        self.setTextElideMode(Qt.ElideRight)
        self.setItemDelegateForColumn(0, NameDelegate(self.table, self))  # whole components, from the left
        self.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.setSelectionMode(QAbstractItemView.SingleSelection)
        self.verticalHeader().setVisible(False)
        self.verticalHeader().setDefaultSectionSize(20)
        self.horizontalHeader().setSectionResizeMode(QHeaderView.Interactive)
        self.horizontalHeader().setStretchLastSection(True)
        self.horizontalHeader().setMinimumSectionSize(48)
        self.columns = ColumnPriority(self, PRIORITY, list(COLUMNS))
        header = self.horizontalHeader()  # the SNR, where shown, beside the update ratio
        header.moveSection(header.visualIndex(SNR), header.visualIndex(3) + 1)
        self.selectionModel().selectionChanged.connect(self._user_selected)
        selection.changed.connect(self.show_selection)

    def _user_selected(self) -> None:
        rows = self.selectionModel().selectedRows()
        if rows:
            name = self.table.rows[self.proxy.mapToSource(rows[0]).row()][0]
            self.selection.select(param=name, module=name.rpartition(".")[0], source="table")

    def show_selection(self, selection: Selection) -> None:
        """Select the row of the selected parameter."""
        if selection.source == "table":
            return
        row = self.table.row_of(selection.param) if selection.param else -1
        blocker = self.selectionModel().blockSignals(True)
        self.clearSelection()
        if row >= 0:
            index = self.proxy.mapFromSource(self.table.index(row, 0))
            self.selectRow(index.row())
            self.scrollTo(index)
        self.selectionModel().blockSignals(blocker)


def run_snr(follower, step: int | None, timeline=None) -> dict[str, float | None]:
    """The gradient SNR per parameter (docs/noise.md) a followed run (``RunFollower``) recorded
    at ``step``, without a run the live session's (``timeline``'s noise track); {} without a
    step or a noise scale there (a damaged table too: the rest of the window shows the step);
    a run recorded with ``noise_every`` > 1: None for each parameter at a step without one."""
    if follower is None and timeline is not None and step is not None:
        return timeline.optimizer.noise.snr_at(step)
    if follower is None or step is None:
        return {}
    from gradexplorer.core.messages.errors import UserError
    from gradexplorer.core.runs.noise_rows import noise_params

    try:
        snr = {name: p["snr"] for name, p in noise_params(follower.run, step).items()}
    except UserError:
        return {}
    if not snr and follower.run.settings.get("noise_every", 1) != 1:  # a step the cadence left
        return dict.fromkeys(follower.run.parameters)  # out: the column kept, its cells empty
    return snr
