"""The details pane names the source line of a clicked op and copies its path:line (issue 34)."""

from __future__ import annotations

import inspect

from PySide6.QtCore import QUrl
from PySide6.QtGui import QGuiApplication

from gradexplorer.core.model.examples.lenet import LeNet
from gradexplorer.gui.panels.details_pane import COPY_SOURCE
from tests.gui_helpers import TIMEOUT_MS, click_node, node_index, open_model, wait_idle


def test_details_pane_shows_and_copies_the_clicked_ops_source_line(qtbot, make_window):
    window = make_window()
    window.resize(1024, 700)
    open_model(qtbot, window, "example:lenet", batch_size=None)
    drawing = window.graph_panel.drawing
    index = node_index(drawing, "AddmmBackward0", "fc1")
    click_node(qtbot, window, index)
    qtbot.waitUntil(lambda: window.selection.current.node == drawing.ids[index], timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    lines, first = inspect.getsourcelines(LeNet.forward)
    line = first + next(i for i, text in enumerate(lines) if "self.fc1(x)" in text)
    text = window.details.toPlainText()
    assert f"fc1 · lenet.py:{line} x = F.relu(self.fc1(x)) copy path:line" in text, text
    assert f'href="{COPY_SOURCE}"' in window.details.toHtml()
    QGuiApplication.clipboard().clear()
    window.details.anchorClicked.emit(QUrl(COPY_SOURCE))
    assert QGuiApplication.clipboard().text() == f"{inspect.getsourcefile(LeNet)}:{line}"
