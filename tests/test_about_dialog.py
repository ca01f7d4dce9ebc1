"""The About box lists the bug-report details, shows the app icon and copies the details."""

import platform

import pytest
import torch

pytest.importorskip("PySide6")

from PySide6.QtCore import Qt, qVersion  # noqa: E402
from PySide6.QtGui import QGuiApplication  # noqa: E402

from gradexplorer import __version__  # noqa: E402
from gradexplorer.gui.dialogs.about_dialog import AboutDialog  # noqa: E402


@pytest.fixture
def dialog(qtbot):
    box = AboutDialog()
    qtbot.addWidget(box)
    box.show()
    return box


def test_details_name_versions_and_devices(dialog):
    text = dialog.details_view.toPlainText()
    lines = dict(line.split(": ", 1) for line in text.splitlines())
    assert lines["gradexplorer"] == __version__
    assert lines["python"] == platform.python_version()
    assert lines["torch"] == torch.__version__
    assert lines["CUDA"] == (torch.version.cuda or "none")
    assert lines["Qt"] == qVersion()
    assert lines["devices"].split(", ")[0] == "cpu"
    assert len(lines["devices"].split(", ")) == 1 + torch.cuda.device_count()


def test_shows_the_application_icon(dialog):
    pixmap = dialog.icon_label.pixmap()
    assert not pixmap.isNull()
    image = pixmap.toImage()
    centre = image.pixelColor(image.width() // 2, image.height() // 2)
    assert image.pixelColor(0, 0).alpha() == 0 and centre.alpha() == 255


def test_copy_button_puts_details_on_clipboard(dialog, qtbot):
    clipboard = QGuiApplication.clipboard()
    clipboard.setText("something else")
    qtbot.mouseClick(dialog.copy_button, Qt.MouseButton.LeftButton)
    assert clipboard.text() == dialog.details_view.toPlainText()
    assert "torch: " in clipboard.text()


def test_close_button_closes(dialog, qtbot):
    with qtbot.waitSignal(dialog.rejected, timeout=30_000):
        qtbot.keyClick(dialog, Qt.Key.Key_Escape)
    assert not dialog.isVisible()
