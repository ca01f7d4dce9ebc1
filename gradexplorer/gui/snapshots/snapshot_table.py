"""A table of one snapshot's parameters, or of two snapshots compared."""

from __future__ import annotations

import math

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem, QWidget

from gradexplorer.core.graph.style import format_shape
from gradexplorer.core.snapshot import Comparison, Snapshot
from gradexplorer.gui.text.number_text import format_number
from gradexplorer.gui.theme import ALARM

SNAPSHOT_COLUMNS = ("Parameter", "Shape", "Norm", "Max |g|", "Zeros", "NaN/Inf")
COMPARE_COLUMNS = ("Parameter", "Norm A", "Norm B", "B/A", "Cosine", "Hist. distance")


def _item(text: str, numeric: bool = False, alarm: bool = False) -> QTableWidgetItem:
    item = QTableWidgetItem(text)
    item.setFlags(Qt.ItemIsSelectable | Qt.ItemIsEnabled)
    if numeric:
        item.setTextAlignment(Qt.AlignRight | Qt.AlignVCenter)
    if alarm:
        item.setForeground(QColor(ALARM))
    return item


def _cells(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return format_number(value, 3)


class SnapshotTable(QTableWidget):
    """Rows are parameters; ``current_name()`` is the selected one."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.setSelectionMode(QAbstractItemView.SingleSelection)
        self.setAlternatingRowColors(True)
        self.verticalHeader().setVisible(False)
        self.verticalHeader().setDefaultSectionSize(20)
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeToContents)

    def _fill(self, headers: tuple[str, ...], rows: list[list[QTableWidgetItem]]) -> None:
        self.clear()
        self.setColumnCount(len(headers))
        self.setHorizontalHeaderLabels(headers)
        self.setRowCount(len(rows))
        for r, row in enumerate(rows):
            for c, item in enumerate(row):
                self.setItem(r, c, item)
        if rows:
            self.selectRow(0)

    def show_snapshot(self, snapshot: Snapshot) -> None:
        """One row per parameter with its recorded statistics."""
        rows = []
        for name, s in snapshot.stats.items():
            bad = bool(s.nan_count or s.inf_count)
            shape = format_shape(s.shape)
            if not s.has_grad:
                rows.append([_item(name), _item(shape), _item("no grad"), _item(""), _item(""), _item("")])
                continue
            rows.append([_item(name), _item(shape), _item(_cells(s.norm), True),
                         _item(_cells(s.abs_max), True), _item(_cells(s.zero_fraction), True),
                         _item(f"{s.nan_count}/{s.inf_count}" if bad else "ok", alarm=bad)])
        self._fill(SNAPSHOT_COLUMNS, rows)

    def show_comparison(self, comparison: Comparison) -> None:
        """One row per shared parameter, then the whole gradient vector."""
        rows = []
        for c in [*comparison.rows, comparison.total]:
            low = not math.isnan(c.cosine) and c.cosine < 0.9
            rows.append([_item(c.name), _item(_cells(c.norm_a), True), _item(_cells(c.norm_b), True),
                         _item(_cells(c.norm_ratio), True), _item(_cells(c.cosine), True, alarm=low),
                         _item(_cells(c.hist_distance), True)])
        for name in comparison.only_in_a:
            rows.append([_item(name), _item("has grad", True), _item("no grad", True, alarm=True),
                         _item(""), _item(""), _item("")])
        for name in comparison.only_in_b:
            rows.append([_item(name), _item("no grad", True, alarm=True), _item("has grad", True),
                         _item(""), _item(""), _item("")])
        self._fill(COMPARE_COLUMNS, rows)

    def current_name(self) -> str | None:
        """The parameter of the selected row."""
        row = self.currentRow()
        item = self.item(row, 0) if row >= 0 else None
        return item.text() if item is not None else None
