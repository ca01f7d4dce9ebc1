"""The model's module tree: name, type, parameter count, hook badge and live gradient columns
(norm, max |g|, update ratio, NaN/Inf) rolled up per module, sortable, filterable, tinted."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QStyleOptionViewItem, QTreeWidget, QTreeWidgetItem, QWidget

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
DISPLAY, EDIT, TOOLTIP, ALIGNMENT, BACKGROUND, FOREGROUND = (int(role) for role in (
    Qt.DisplayRole, Qt.EditRole, Qt.ToolTipRole, Qt.TextAlignmentRole, Qt.BackgroundRole,
    Qt.ForegroundRole))  # plain ints: a row's data is asked for per role and cell as it paints
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
RIGHT = Qt.AlignRight | Qt.AlignVCenter
BLANK = ("", "", "", "")


def figure(value: float | None) -> str:
    """Compact text for a figure, blank for None."""
    return "" if value is None else f"{value:.3g}"


class ModuleItem(QTreeWidgetItem):
    """A module's row. Its name, type, count and figures are answered when a view asks (what
    is painted, sorted or measured): a model of thousands of modules is not thousands of
    ``setText``/``setData`` calls per step. Sorts numbers as numbers (missing figures last)."""

    def __init__(self, tree: ModuleTree, path: str, kind: str, count: int) -> None:
        super().__init__()
        self.tree, self.path, self.kind, self.count = tree, path, kind, count

    def data(self, column: int, role: int = DISPLAY) -> Any:  # noqa: D102 - Qt API
        if column == 3:  # the hook's badge, icon and tooltip (set_hooks)
            value = super().data(column, role)
            return "" if value is None and (role == DISPLAY or role == EDIT) else value
        if role == DISPLAY or role == EDIT:
            if column >= 4:
                return self.tree.cells(self.path)[column - 4]
            return (self.path.rpartition(".")[2] or "(model)", self.kind, f"{self.count:,}")[column]
        if role == SORT_ROLE:
            return self.tree.sort_value(self.path, column) if column >= 4 else \
                self.count if column == 2 else None
        if role == BACKGROUND or role == FOREGROUND:
            return self.tree.tint(self.path, role == BACKGROUND) if column == 0 or column == 4 else None
        if role == PATH_ROLE:
            return self.path if column == 0 else None
        if role == TOOLTIP:
            return (self.path or "the whole model") if column == 0 else None
        if role == ALIGNMENT:
            return RIGHT if column == 2 else None
        return None  # (no font, check state, icon … outside the Hook column)

    def __lt__(self, other: QTreeWidgetItem) -> bool:
        column = self.treeWidget().sortColumn() if self.treeWidget() else 0
        mine, theirs = self.data(column, SORT_ROLE), other.data(column, SORT_ROLE)
        if mine is None or theirs is None:
            return self.text(column) < other.text(column)
        return mine < theirs


def subtree_parameter_counts(model: nn.Module) -> dict[str, int]:
    """Module path -> parameters of that module and its children (a tensor shared within a
    subtree counted once), in one pass over the parameters instead of one per module: grouped
    by the module holding them, each group handed up to that module's ancestors."""
    held: dict[str, dict[int, int]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        held.setdefault(name.rpartition(".")[0], {})[id(param)] = param.numel()
    members: dict[str, dict[int, int]] = {}
    for owner, sizes in held.items():
        path = owner
        while True:
            members.setdefault(path, {}).update(sizes)
            if not path:
                break
            path = path.rpartition(".")[0]
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
        self._hidden: set[str] = set()  # paths filtered out
        self._forget_stats()
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
        self._items, self._badged, self._hidden = {}, {}, set()
        self._forget_stats()

    def _forget_stats(self) -> None:
        self._rolled: dict[str, Any] = {}  # ModuleGradients by path, the step shown
        self._with_nan: set[str] = set()  # modules holding a parameter with a NaN gradient
        self._tints: dict[str, tuple] = {}  # path -> (background, foreground) brushes
        self._cells: dict[str, tuple[str, ...]] = {}  # a row's figure texts, once asked for
        self._name_widths: dict[str, int] = {}  # a name's text width, measured once per model

    def set_model(self, model: nn.Module) -> None:
        """Rebuild the tree for ``model``."""
        sorting = self.isSortingEnabled()
        self.setSortingEnabled(False)
        self.clear()
        self._items, self._badged, self._hidden = {}, {}, set()
        self._forget_stats()
        counts = subtree_parameter_counts(model)
        children: dict[str, list[QTreeWidgetItem]] = {}
        for path, module in model.named_modules():
            item = self._items[path] = ModuleItem(self, path, type(module).__name__, counts.get(path, 0))
            if path:
                children.setdefault(path.rpartition(".")[0], []).append(item)
            else:
                self.addTopLevelItem(item)
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
        open_paths: dict[str, bool] = {}  # whether the rows below module ``path`` are on show

        def opened(path: str) -> bool:  # it is expanded, and so is every module above it
            found = open_paths.get(path)
            if found is None:
                item = self._items.get(path)
                found = item is None or item.isExpanded() and (not path or opened(path.rpartition(".")[0]))
                open_paths[path] = found
            return found

        hidden = self._hidden
        return [(path.count(".") + 1 if path else 0, item) for path, item in self._items.items()
                if path not in hidden and (not path or opened(path.rpartition(".")[0]))]

    def _name_width(self, metrics, path: str) -> int:
        width = self._name_widths.get(path)
        if width is None:
            width = self._name_widths[path] = metrics.horizontalAdvance(
                path.rpartition(".")[2] or "(model)")
        return width

    def _content_width(self, column: int, rows) -> int:
        """What ``sizeHintForColumn`` gives, asking the delegate once per distinct text shown
        (it asked for a thousand rows, each a call into Python)."""
        badged, distinct = self._badged, {}
        key = (lambda item: item.kind) if column == 1 else (lambda item: item.count) if column == 2 \
            else (lambda item: badged.get(item.path, ""))
        for _depth, item in rows:
            distinct.setdefault(key(item), item)
        option, delegate = QStyleOptionViewItem(), self.itemDelegate()
        self.initViewItemOption(option)
        return max((delegate.sizeHint(option, self.indexFromItem(item, column)).width()
                    for item in distinct.values()), default=0)

    def fit_columns(self) -> None:
        """Columns sized to their contents (the name column to the widest name on show, its
        indentation included, up to NAME_MOST besides it), then shown by priority as width
        allows; the name column keeps room for a name beside the deepest row's indentation."""
        metrics, bold = self.fontMetrics(), self.header().fontMetrics()
        rows = self.shown_rows()
        indent = self.indentation()
        deepest = max((depth for depth, _item in rows), default=0) * indent
        widths = {0: max([bold.horizontalAdvance(COLUMNS[0]) + 22]
                         + [depth * indent + self._name_width(metrics, item.path) + 16
                            for depth, item in rows])}
        for column in range(1, len(COLUMNS)):
            title = bold.horizontalAdvance(COLUMNS[column]) + 22
            if column in GRADIENT_COLUMNS:
                widths[column] = max([title] + [metrics.horizontalAdvance(t) + 10 for t in WIDEST_FIGURES])
            else:
                widths[column] = max(title, self._content_width(column, rows) + 8)
        badges = [metrics.horizontalAdvance(a) + self.iconSize().width() + 24 for a in self._badged.values()]
        # every badge whole, also on rows not on show; a long one (file:PATH.py:FUNCTION) in its tooltip
        widths[3] = max(bold.horizontalAdvance(COLUMNS[3]) + 22, min(max([widths[3], *badges]), HOOK_MOST))
        widths[0] = min(NAME_MOST + deepest, widths[0])
        self.columns.name_least = deepest + NAME_TEXT_LEAST
        self.columns.remember(widths)

    def set_stats(self, params: dict[str, Any]) -> None:
        """Roll the step's parameter statistics up into every module row; tint by norm (each
        row's texts are written when it is shown, ``cells``)."""
        rolled = module_gradients(params)
        self._with_nan = {path for name, s in params.items() if s.nan_count for path in owners(name)}
        paths = [p for p in self._items if p in rolled]
        tints = table_tints([rolled[p] for p in paths])  # NaN/Inf modules violet
        brushes = {tint: (QBrush(QColor.fromRgba(tint)), QBrush(QColor(TINTED_TEXT)))
                   for tint in set(tints) if tint}
        self._rolled, self._cells = rolled, {}
        self._tints = {path: brushes[tint] for path, tint in zip(paths, tints, strict=True) if tint}
        sorting = self.isSortingEnabled()
        self.setSortingEnabled(False)
        self.setSortingEnabled(sorting)  # sorted again by the new figures
        self.viewport().update()

    def cells(self, path: str) -> tuple[str, ...]:
        """The Norm, Max |g|, Upd ratio and NaN/Inf texts of module ``path``'s row."""
        cells = self._cells.get(path)
        if cells is None:
            g = self._rolled.get(path)
            if g is None:
                return BLANK
            word = ("NaN" if path in self._with_nan else "inf") if g.nonfinite else None
            cells = self._cells[path] = (  # never the finite part's figures under NaN/Inf
                word or figure(g.norm), word or figure(g.abs_max), update_ratio_text(g.update_ratio, 3),
                f"⚠ {g.nonfinite}" if g.nonfinite else ("ok" if g.with_grad else ""))
        return cells

    def sort_value(self, path: str, column: int) -> float | None:
        """Module ``path``'s sort key in gradient column ``column`` (None before any figures)."""
        g = self._rolled.get(path)
        if g is None:
            return None
        if column == 7:
            return g.nonfinite
        if g.nonfinite and column in (4, 5):
            return math.inf  # a NaN/Inf gradient sorts as the largest
        value = (g.norm, g.abs_max, g.update_ratio)[column - 4]
        return -1.0 if value is None else value

    def tint(self, path: str, background: bool) -> QBrush | None:
        """The row's tint (background) or its text colour on it; None: untinted."""
        brushes = self._tints.get(path)
        return None if brushes is None else brushes[0 if background else 1]

    def set_filter(self, text: str) -> None:
        """Show only modules whose path contains ``text`` (with their ancestors, to reach them)."""
        self._filter = needle = text.strip().lower()
        keep = {p for p in self._items if needle in p.lower()} if needle else set(self._items)
        for path in list(keep):
            while path:
                path = path.rpartition(".")[0]
                keep.add(path)
        self._hidden = set(self._items) - keep
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
