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


def test_spike_ranking_and_ab_window_name_the_line_using_the_parameter_or_module(qtbot, make_window):
    from gradexplorer.core.diagnose.spikes import SpikeEvent

    window = make_window()
    window.resize(1024, 700)
    open_model(qtbot, window, "example:lenet", batch_size=None)
    lines, first = inspect.getsourcelines(LeNet.forward)
    fc1 = first + next(i for i, text in enumerate(lines) if "self.fc1(x)" in text)
    conv1 = first + next(i for i, text in enumerate(lines) if "self.conv1(x)" in text)
    event = SpikeEvent(step=0, until=0, reasons=["loss ×12 above its band"], ranking=[
        {"name": "fc1.weight", "figure": "norm", "onset": 0, "factor": 12.0},
        {"name": "conv1.bias", "figure": "norm", "onset": 0, "factor": 3.0}])
    panel = window.forensics.spike_panel
    panel.show_event(event)
    ranking = panel.ranking
    assert ranking.headerItem().text(5) == "line"
    assert ranking.topLevelItem(0).text(5) == f"lenet.py:{fc1} x = F.relu(self.fc1(x))"
    assert ranking.topLevelItem(1).text(5).startswith(f"lenet.py:{conv1} x = ")
    ab = window.hook_actions.open_ab("fc1", "scale:0.5", steps=1)
    assert ab.source.text() == f"hooked module called at lenet.py:{fc1} x = F.relu(self.fc1(x))"
    qtbot.waitUntil(lambda: ab.finished, timeout=TIMEOUT_MS)
    ab.close()
