"""The About box: version, Python, torch, CUDA, Qt and devices, with a copy-to-clipboard button."""

from __future__ import annotations

from PySide6.QtCore import Qt, qVersion
from PySide6.QtGui import QGuiApplication, QIcon
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from gradexplorer._version import __version__
from gradexplorer.gui.crash_log import crash_log_path
from gradexplorer.resources import resource_path

ICON_SIZE = 64


def about_facts() -> dict[str, str]:
    """Everything the About box lists, in display order (torch is imported by then: the
    window imports none of it at start, its training thread does)."""
    import torch

    from gradexplorer.core.session.devices import available_devices, describe_device, unavailable_devices
    from gradexplorer.core.session.environment import environment_facts

    facts = environment_facts()
    return {
        "gradexplorer": __version__,
        "python": facts["python"],
        "platform": facts["platform"],
        "torch": facts["torch"],
        "CUDA": facts["cuda"],
        "Qt": qVersion(),
        "PySide6": facts["PySide6"],
        "pyqtgraph": facts["pyqtgraph"],
        "devices": ", ".join(describe_device(torch.device(name)) for name in available_devices()),
        **{f"no {kind}": why for kind, why in unavailable_devices().items()},
        "crash log": str(crash_log_path()),  # a native crash's stacks (attach it to a bug report)
    }


def about_text() -> str:
    """The facts as ``key: value`` lines, ready to paste into a bug report."""
    return "\n".join(f"{key}: {value}" for key, value in about_facts().items())


def app_icon() -> QIcon:
    """The application icon (SVG, scales to any size)."""
    return QIcon(str(resource_path("icons", "gradexplorer.svg")))


class AboutDialog(QDialog):
    """Modal About box; ``copy_button`` puts ``details`` on the clipboard."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("About gradexplorer")
        self.setWindowIcon(app_icon())
        self.details = about_text()
        self.icon_label = QLabel()
        self.icon_label.setPixmap(app_icon().pixmap(ICON_SIZE, ICON_SIZE))
        self.details_view = self._details_view()
        self.copy_button = QPushButton("Copy details")
        self.copy_button.setToolTip("Copy these details to the clipboard for a bug report")
        self.copy_button.clicked.connect(self.copy_details)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.addButton(self.copy_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(self._header())
        layout.addWidget(self.details_view)
        layout.addWidget(buttons)
        self.resize(520, 360)

    def _header(self) -> QHBoxLayout:
        title = QLabel(
            f"<h2>gradexplorer {__version__}</h2>"
            "<p>See and control PyTorch's backward pass.</p>"
        )
        title.setTextFormat(Qt.TextFormat.RichText)
        row = QHBoxLayout()
        row.addWidget(self.icon_label)
        row.addWidget(title, 1)
        return row

    def _details_view(self) -> QPlainTextEdit:
        view = QPlainTextEdit(self.details)
        view.setReadOnly(True)
        view.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        return view

    def copy_details(self) -> None:
        """Put the details text on the system clipboard."""
        QGuiApplication.clipboard().setText(self.details)
