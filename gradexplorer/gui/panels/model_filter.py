"""The filter above the module tree and the parameter table: by text, and by module subtree."""

from __future__ import annotations

from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLineEdit, QWidget

from gradexplorer.gui.models.selection import Selection, SelectionModel
from gradexplorer.gui.panels.module_tree import ModuleTree
from gradexplorer.gui.panels.parameter_table import ParameterTable


class ModelFilterBar(QWidget):
    """Typing filters both views; "selected module only" keeps the table to that subtree."""

    def __init__(self, selection: SelectionModel, tree: ModuleTree, table: ParameterTable,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.selection, self.tree, self.table = selection, tree, table
        self.text_edit = QLineEdit(placeholderText="filter modules and parameters")
        self.text_edit.setClearButtonEnabled(True)
        self.subtree_box = QCheckBox("subtree",
                                     toolTip="list only the parameters under the selected module")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(self.text_edit, 1)
        layout.addWidget(self.subtree_box)
        self.text_edit.textChanged.connect(self._text_changed)
        self.subtree_box.toggled.connect(lambda _on: self._selection_changed(selection.current))
        selection.changed.connect(self._selection_changed)

    def _text_changed(self, text: str) -> None:
        self.tree.set_filter(text)
        self.table.proxy.set_filter(text=text)

    def _selection_changed(self, current: Selection) -> None:
        if current.source == "table":
            return  # picking a row in the table must not narrow the table under the user
        module = current.module if current.module is not None else (
            current.param.rpartition(".")[0] if current.param else "")
        self.table.proxy.set_filter(subtree=module if self.subtree_box.isChecked() else "")
