""""Open model…": a built-in example, or a Python file with a callable, shape and weights."""

from __future__ import annotations

from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.model.callable_finder import list_callables
from gradexplorer.core.model.examples import DEFAULT_EXAMPLE, EXAMPLES
from gradexplorer.core.model.spec import LOSSES, ModelOptions, parse_shape
from gradexplorer.gui.errors import show_error


def browse_row(edit: QLineEdit, caption: str, filters: str) -> QWidget:
    """A line edit with a Browse… button that fills it from a file dialog."""
    row = QWidget()
    layout = QHBoxLayout(row)
    layout.setContentsMargins(0, 0, 0, 0)
    button = QPushButton("Browse…")

    def browse() -> None:
        path, _ = QFileDialog.getOpenFileName(row, caption, edit.text(), filters)
        if path:
            edit.setText(path)

    button.clicked.connect(browse)
    layout.addWidget(edit, 1)
    layout.addWidget(button)
    return row


class OpenModelDialog(QDialog):
    """Collects a model spec and its options; ``spec()`` and ``options()`` read them."""

    def __init__(self, parent: QWidget | None = None, current_spec: str = "") -> None:
        super().__init__(parent)
        self.setWindowTitle("Open model")
        self.resize(560, 420)
        self.tabs = QTabWidget()
        self.tabs.addTab(self._examples_tab(), "Built-in example")
        self.tabs.addTab(self._file_tab(), "Python file")
        self.weights_edit = QLineEdit(placeholderText="optional .safetensors / .pt state dict")
        self.seed_spin = QSpinBox(minimum=0, maximum=2**31 - 1)
        self.batch_spin = QSpinBox(minimum=0, maximum=1_000_000, specialValueText="default")
        common = QFormLayout()
        common.addRow("Weights", browse_row(self.weights_edit, "Weights",
                                            "State dicts (*.safetensors *.pt *.pth);;All files (*)"))
        common.addRow("Seed", self.seed_spin)
        common.addRow("Batch size", self.batch_spin)
        buttons = QDialogButtonBox(QDialogButtonBox.Open | QDialogButtonBox.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs, 1)
        layout.addLayout(common)
        layout.addWidget(buttons)
        self._preselect(current_spec)

    def _examples_tab(self) -> QWidget:
        tab = QWidget()
        self.example_list = QListWidget()
        for example in EXAMPLES.values():
            item = QListWidgetItem(f"{example.name} — {example.summary}")
            item.setData(256, example.name)
            self.example_list.addItem(item)
        self.example_list.itemDoubleClicked.connect(lambda _item: self.accept())
        self.example_options = QLineEdit(placeholderText="options, e.g. blocks=200,width=16")
        form = QFormLayout(tab)
        form.addRow(self.example_list)
        form.addRow("Options", self.example_options)
        return tab

    def _file_tab(self) -> QWidget:
        tab = QWidget()
        self.file_edit = QLineEdit(placeholderText="path/to/model.py")
        self.file_edit.textChanged.connect(self._refresh_callables)
        self.callable_box = QComboBox(editable=True)
        self.shape_edit = QLineEdit(placeholderText="e.g. 1,1,32,32 (when the callable returns an nn.Module)")
        self.loss_box = QComboBox()
        self.loss_box.addItems(["(default)", *LOSSES])
        form = QFormLayout(tab)
        form.addRow("File", browse_row(self.file_edit, "Model file", "Python files (*.py)"))
        form.addRow("Callable", self.callable_box)
        form.addRow("Input shape", self.shape_edit)
        form.addRow("Loss", self.loss_box)
        return tab

    def _preselect(self, spec: str) -> None:
        name = spec[len("example:"):].partition(":")[0] if spec.startswith("example:") else ""
        if not spec.startswith("example:") and ".py:" in spec:
            path, _, attr = spec.rpartition(":")
            self.tabs.setCurrentIndex(1)
            self.file_edit.setText(path)
            self.callable_box.setCurrentText(attr)
            name = DEFAULT_EXAMPLE
        names = list(EXAMPLES)
        self.example_list.setCurrentRow(names.index(name) if name in names else
                                        names.index(DEFAULT_EXAMPLE))

    def _refresh_callables(self, path: str) -> None:
        current = self.callable_box.currentText()
        self.callable_box.clear()
        self.callable_box.addItems(list_callables(path))
        if current and self.callable_box.findText(current) >= 0:
            self.callable_box.setCurrentText(current)

    def spec(self) -> str:
        """The model spec the dialog describes."""
        if self.tabs.currentIndex() == 0:
            item = self.example_list.currentItem()
            name = item.data(256) if item else DEFAULT_EXAMPLE
            extra = self.example_options.text().strip()
            return f"example:{name}" + (f":{extra}" if extra else "")
        path, attr = self.file_edit.text().strip(), self.callable_box.currentText().strip()
        if not path:
            raise UserError("choose a Python file that defines your model")
        if not attr:
            raise UserError(f"choose the callable in {path} that builds the model")
        return f"{path}:{attr}"

    def options(self) -> ModelOptions:
        """The ModelOptions the dialog describes."""
        file_tab = self.tabs.currentIndex() == 1
        shape = self.shape_edit.text().strip() if file_tab else ""
        loss = self.loss_box.currentText() if file_tab else "(default)"
        return ModelOptions(
            input_shape=parse_shape(shape) if shape else None,
            loss=None if loss == "(default)" else loss,
            weights=self.weights_edit.text().strip() or None,
            batch_size=self.batch_spin.value() or None,
            seed=self.seed_spin.value(),
        )

    def accept(self) -> None:  # noqa: D102 - validate before closing
        try:
            self.spec()
            self.options()
        except UserError as exc:
            show_error(self, str(exc))
            return
        super().accept()


def ask_model(parent: QWidget | None, current_spec: str = "") -> tuple[str, ModelOptions] | None:
    """Show the dialog; the chosen spec and options, or None if cancelled."""
    dialog = OpenModelDialog(parent, current_spec)
    if dialog.exec() != QDialog.Accepted:
        return None
    return dialog.spec(), dialog.options()
