"""The model's module tree: name, type, parameter count, hook badge and live gradient columns
(norm, max |g|, update ratio, NaN/Inf) rolled up per module, sortable, filterable, tinted."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QTreeWidget, QTreeWidgetItem, QWidget

from gradexplorer.core.stats.module_rollup import module_gradients, owners
from gradexplorer.gui.graph.tint import table_tints
from gradexplorer.gui.models.selection import Selection, SelectionModel
from gradexplorer.gui.panels.column_priority import ColumnPriority
from gradexplorer.gui.panels.parameter_table import TINTED_TEXT
from gradexplorer.gui.text.number_text import WIDEST_FIGURES, update_ratio_text
from gradexplorer.gui.theme import icon

if TYPE_CHECKING:
    from torch import nn

PATH_ROLE = Qt.UserRole
SORT_ROLE = Qt.UserRole + 1
COLUMNS = ("Module", "Type", "Params", "Hook", "Norm", "Max |g|", "Upd ratio", "NaN/Inf")
GRADIENT_COLUMNS = (4, 5, 6, 7)
HEADER_TIPS = ("module path's last part (hover a row for it whole)", "the module's class",
               "parameters of the module and its children", "hook attached to the module",
               "L2 norm of all its parameters' gradients together this step",
               "largest |g| over its parameters' gradients",
               "largest update ratio ‖Δθ‖/‖θ‖ among its parameters",
               "NaN / ±Inf gradient elements among its parameters")
PRIORITY = [0, 4, 5, 3, 7, 2, 1, 6]  # shown first in a narrow tree: name, norm, max |g|, hook
NAME_MOST = 320  # the widest the name column opens at, indentation aside (pixels)
INDENT = 12  # per level (Qt's 20 left a 5-deep GPT-2 row 16 pixels for its name at 1024×700)
HOOK_MOST = 160  # the widest the Hook column opens at (pixels)
NAME_TEXT_LEAST = 64  # beside the deepest shown row's indentation: "c_attn", "downsample" whole


def figure(value: float | None) -> str:
    """Compact text for a figure, blank for None."""
    return "" if value is None else f"{value:.3g}"


class ModuleItem(QTreeWidgetItem):
    """A row that sorts numbers as numbers (missing figures last)."""

    def __lt__(self, other: QTreeWidgetItem) -> bool:
        column = self.treeWidget().sortColumn() if self.treeWidget() else 0
        mine, theirs = self.data(column, SORT_ROLE), other.data(column, SORT_ROLE)
        if mine is None or theirs is None:
            return self.text(column) < other.text(column)
        return mine < theirs


def subtree_parameter_counts(model: nn.Module) -> dict[str, int]:
    """Module path -> parameters of that module and its children (a tensor shared within a
    subtree counted once), in one pass over the parameters instead of one per module."""
    members: dict[str, dict[int, int]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        parts = name.split(".")[:-1]
        for depth in range(len(parts) + 1):
            members.setdefault(".".join(parts[:depth]), {})[id(param)] = param.numel()
    return {path: sum(sizes.values()) for path, sizes in members.items()}


class ModuleTree(QTreeWidget):
    """Shows ``named_modules()`` as a tree; selecting a row selects that module everywhere."""

    hook_menu_requested = Signal(str, QPoint)  # module path, global position

    def __init__(self, selection: SelectionModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.selection = selection
        self._items: dict[str, QTreeWidgetItem] = {}
        self._badged: dict[str, str] = {}  # the hooks the rows show
        self._filter = ""
        self.setHeaderLabels(COLUMNS)
        for column, tip in enumerate(HEADER_TIPS):
            self.headerItem().setToolTip(column, tip)
        self.setSortingEnabled(True)
        self.sortByColumn(-1, Qt.AscendingOrder)  # model order until a header is clicked
        self.setTextElideMode(Qt.ElideRight)  # one component per row: read from its start
        self.setIndentation(INDENT)
        self.setRootIsDecorated(False)  # one top row, "(model)": no branch arrow column for it
        self.setAlternatingRowColors(True)
        self.setUniformRowHeights(True)
        self.setSelectionMode(QTreeWidget.SingleSelection)
        self.setContextMenuPolicy(Qt.CustomContextMenu)
        self.customContextMenuRequested.connect(self._context_menu)
        self.columns = ColumnPriority(self, PRIORITY, list(COLUMNS))
        self.itemExpanded.connect(lambda _item: self.fit_columns())
        self.itemCollapsed.connect(lambda _item: self.fit_columns())
        self.itemSelectionChanged.connect(self._user_selected)
        selection.changed.connect(self.show_selection)

    def clear_model(self) -> None:
        """No rows (a new model is on its way)."""
        self.clear()
        self._items, self._badged = {}, {}

    def set_model(self, model: nn.Module) -> None:
        """Rebuild the tree for ``model``."""
        sorting = self.isSortingEnabled()
        self.setSortingEnabled(False)
        self.clear()
        self._items, self._badged = {}, {}
        counts = subtree_parameter_counts(model)
        children: dict[str, list[QTreeWidgetItem]] = {}
        blank, right = [""] * len(GRADIENT_COLUMNS), Qt.AlignRight | Qt.AlignVCenter
        for path, module in model.named_modules():
            count = counts.get(path, 0)
            item = ModuleItem([path.rpartition(".")[2] or "(model)", type(module).__name__,
                               f"{count:,}", "", *blank])
            item.setData(0, PATH_ROLE, path)
            item.setToolTip(0, path or "the whole model")
            item.setData(2, SORT_ROLE, count)
            item.setTextAlignment(2, right)
            if path:
                children.setdefault(path.rpartition(".")[0], []).append(item)
            else:
                self.addTopLevelItem(item)
            self._items[path] = item
        for parent, items in children.items():  # each parent's rows at once
            holder = self._items.get(parent)
            holder.addChildren(items) if holder is not None else self.addTopLevelItems(items)
        self.setSortingEnabled(sorting)
        self.expandToDepth(1)
        self.fit_columns()
        if self._filter:
            self.set_filter(self._filter)

    def shown_rows(self) -> list[tuple[int, QTreeWidgetItem]]:
        """(depth, item) of the rows on show: not filtered out, their ancestors expanded."""
        rows = []
        for path, item in self._items.items():
            if item.isHidden():
                continue
            parent = item.parent()
            while parent is not None and parent.isExpanded():
                parent = parent.parent()
            if parent is None:
                rows.append((path.count(".") + 1 if path else 0, item))
        return rows

    def fit_columns(self) -> None:
        """Columns sized to their contents (the name column to the widest name on show, its
        indentation included, up to NAME_MOST besides it), then shown by priority as width
        allows; the name column keeps room for a name beside the deepest row's indentation."""
        metrics, bold = self.fontMetrics(), self.header().fontMetrics()
        rows = self.shown_rows()
        indent = self.indentation()
        deepest = max((depth for depth, _item in rows), default=0) * indent
        widths = {0: max([bold.horizontalAdvance(COLUMNS[0]) + 22]
                         + [depth * indent + metrics.horizontalAdvance(item.text(0)) + 16
                            for depth, item in rows])}
        for column in range(1, len(COLUMNS)):
            title = bold.horizontalAdvance(COLUMNS[column]) + 22
            if column in GRADIENT_COLUMNS:
                widths[column] = max([title] + [metrics.horizontalAdvance(t) + 10 for t in WIDEST_FIGURES])
            else:
                widths[column] = max(title, self.sizeHintForColumn(column) + 8)
        badges = [metrics.horizontalAdvance(a) + self.iconSize().width() + 24 for a in self._badged.values()]
        # every badge whole, also on rows not on show; a long one (file:PATH.py:FUNCTION) in its tooltip
        widths[3] = max(bold.horizontalAdvance(COLUMNS[3]) + 22, min(max([widths[3], *badges]), HOOK_MOST))
        widths[0] = min(NAME_MOST + deepest, widths[0])
        self.columns.name_least = deepest + NAME_TEXT_LEAST
        self.columns.remember(widths)

    def set_stats(self, params: dict[str, Any]) -> None:
        """Roll the step's parameter statistics up into every module row; tint by norm."""
        rolled = module_gradients(params)
        with_nan = {path for name, s in params.items() if s.nan_count for path in owners(name)}
        paths = [p for p in self._items if p in rolled]
        tints = table_tints([rolled[p] for p in paths])  # NaN/Inf modules violet
        sorting = self.isSortingEnabled()
        self.setSortingEnabled(False)  # no re-sort per cell
        brushes = {tint: QBrush(QColor.fromRgba(tint)) if tint else QBrush() for tint in set(tints)}
        dark, plain = QBrush(QColor(TINTED_TEXT)), QBrush()
        for path, tint in zip(paths, tints, strict=True):
            item, g = self._items[path], rolled[path]
            word = ("NaN" if path in with_nan else "inf") if g.nonfinite else None
            values = (g.norm, g.abs_max, g.update_ratio)
            for column, value in zip(GRADIENT_COLUMNS, values, strict=False):
                shown = word if word and column in (4, 5) else None  # never the finite part's
                item.setText(column, shown or (update_ratio_text(value, 3)
                                               if column == GRADIENT_COLUMNS[2] else figure(value)))
                item.setData(column, SORT_ROLE, math.inf if shown else -1.0 if value is None else value)
            item.setText(7, f"⚠ {g.nonfinite}" if g.nonfinite else ("ok" if g.with_grad else ""))
            item.setData(7, SORT_ROLE, g.nonfinite)
            for column in (0, 4):
                item.setBackground(column, brushes[tint])
                item.setForeground(column, dark if tint else plain)
        self.setSortingEnabled(sorting)

    def set_filter(self, text: str) -> None:
        """Show only modules whose path contains ``text`` (with their ancestors, to reach them)."""
        self._filter = needle = text.strip().lower()
        keep = {p for p in self._items if needle in p.lower()} if needle else set(self._items)
        for path in list(keep):
            while path:
                path = path.rpartition(".")[0]
                keep.add(path)
        for path, item in self._items.items():
            item.setHidden(path not in keep)
        if needle:
            self.expandAll()  # no itemExpanded signals
        self.fit_columns()

    def set_hooks(self, hooks: dict[str, str]) -> None:
        """Badge the modules that have a hook attached (only rows that change are touched)."""
        changed = False
        for path in set(hooks) | set(self._badged):
            item, action = self._items.get(path), hooks.get(path)
            if item is None or action == self._badged.get(path):
                continue
            item.setText(3, action or "")
            item.setToolTip(3, action or "")
            item.setIcon(3, icon("hook") if action else icon_none())
            changed = True
        self._badged = {p: a for p, a in hooks.items() if p in self._items}
        if changed:  # the Hook column fits its badges ("block", not "bl…")
            self.fit_columns()

    def path_at(self, pos: QPoint) -> str | None:
        """Module path of the row at viewport position ``pos``."""
        item = self.itemAt(pos)
        return None if item is None else item.data(0, PATH_ROLE)

    def _context_menu(self, pos: QPoint) -> None:
        path = self.path_at(pos)
        if path is not None:
            self.hook_menu_requested.emit(path, self.viewport().mapToGlobal(pos))

    def _user_selected(self) -> None:
        items = self.selectedItems()
        if items:
            self.selection.select(module=items[0].data(0, PATH_ROLE), source="tree")

    def show_selection(self, selection: Selection) -> None:
        """Highlight the selected module (or the module owning the selected parameter)."""
        if selection.source == "tree":
            return
        path = selection.module
        if path is None and selection.param:
            path = selection.param.rpartition(".")[0]
        item = self._items.get(path) if path is not None else None
        self.blockSignals(True)
        self.clearSelection()
        if item is not None:
            self.setCurrentItem(item)
            self.scrollToItem(item)  # expands its ancestors, signals blocked: fit here
        self.blockSignals(False)
        if item is not None:
            self.fit_columns()


def icon_none():
    """An empty icon (clears a badge)."""
    from PySide6.QtGui import QIcon

    return QIcon()
