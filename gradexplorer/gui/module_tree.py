"""The model's module tree: name, type, parameter count and a badge for attached hooks."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtWidgets import QTreeWidget, QTreeWidgetItem, QWidget
from torch import nn

from gradexplorer.gui.models.selection import Selection, SelectionModel
from gradexplorer.gui.theme import icon

PATH_ROLE = Qt.UserRole
COLUMNS = ("Module", "Type", "Params", "Hook")


def own_parameter_count(module: nn.Module) -> int:
    """Parameters of ``module`` and its children."""
    return sum(p.numel() for p in module.parameters())


class ModuleTree(QTreeWidget):
    """Shows ``named_modules()`` as a tree; selecting a row selects that module everywhere."""

    hook_menu_requested = Signal(str, QPoint)  # module path, global position

    def __init__(self, selection: SelectionModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.selection = selection
        self._items: dict[str, QTreeWidgetItem] = {}
        self._badged: dict[str, str] = {}  # the hooks the rows show
        self.setHeaderLabels(COLUMNS)
        self.setAlternatingRowColors(True)
        self.setUniformRowHeights(True)
        self.setSelectionMode(QTreeWidget.SingleSelection)
        self.setContextMenuPolicy(Qt.CustomContextMenu)
        self.customContextMenuRequested.connect(self._context_menu)
        self.itemSelectionChanged.connect(self._user_selected)
        selection.changed.connect(self.show_selection)

    def set_model(self, model: nn.Module) -> None:
        """Rebuild the tree for ``model``."""
        self.clear()
        self._items, self._badged = {}, {}
        for path, module in model.named_modules():
            parent_path = path.rpartition(".")[0] if path else None
            parent = self._items.get(parent_path) if parent_path is not None else None
            item = QTreeWidgetItem([path.rpartition(".")[2] or "(model)", type(module).__name__,
                                    f"{own_parameter_count(module):,}", ""])
            item.setData(0, PATH_ROLE, path)
            item.setTextAlignment(2, Qt.AlignRight | Qt.AlignVCenter)
            (parent.addChild(item) if parent is not None else self.addTopLevelItem(item))
            self._items[path] = item
        self.expandToDepth(1)
        for column in range(3):
            self.resizeColumnToContents(column)

    def set_hooks(self, hooks: dict[str, str]) -> None:
        """Badge the modules that have a hook attached (only rows that change are touched)."""
        for path in set(hooks) | set(self._badged):
            item, action = self._items.get(path), hooks.get(path)
            if item is None or action == self._badged.get(path):
                continue
            item.setText(3, action or "")
            item.setIcon(3, icon("hook") if action else icon_none())
        self._badged = {p: a for p, a in hooks.items() if p in self._items}

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
            self.scrollToItem(item)
        self.blockSignals(False)


def icon_none():
    """An empty icon (clears a badge)."""
    from PySide6.QtGui import QIcon

    return QIcon()
