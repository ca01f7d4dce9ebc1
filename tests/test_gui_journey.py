"""The issue's "done when", as a user does it: click fc1, block it, run, watch, export, reopen."""

from __future__ import annotations

import numpy as np

from gradexplorer.core.snapshot import read_snapshot
from gradexplorer.gui.models.session import SnapshotWritten
from tests.gui_helpers import TIMEOUT_MS, click_node, node_index, open_model, wait_idle


def test_block_fc1_and_watch_conv1_lose_its_gradient(qtbot, make_window, tmp_path):
    window = make_window()
    open_model(qtbot, window)  # the default example
    drawing = window.graph_panel.drawing
    click_node(qtbot, window, node_index(drawing, "AddmmBackward0", "fc1"))
    assert window.selection.current.module == "fc1"
    window.graph_panel.hook_action.trigger()  # the toolbar's "Hook…" on the selected module
    menu = window.hook_actions.menu
    assert menu.module == "fc1" and menu.isVisible()
    with qtbot.waitSignal(window.controller.session.hooks_changed, timeout=TIMEOUT_MS):
        next(a for a in menu.actions() if a.text() == "Block").trigger()
    window.controller.run(5)
    wait_idle(qtbot, window)
    gradients = window.gradients
    window.tree.setCurrentItem(window.tree._items["conv1"])  # look at conv1's histogram
    assert gradients.param == "conv1.weight"
    assert len(gradients.histogram.current_item.getData()[0] or []) == 0
    assert "no gradient" in gradients.histogram.note.toPlainText()
    window.tree.setCurrentItem(window.tree._items["fc2"])
    current = gradients.histogram.current_item.getData()[1]
    previous = gradients.histogram.previous_item.getData()[1]
    counts = np.round(10 ** current - 1) if gradients.histogram.auto_shown else current  # auto log
    assert counts.sum() == 640 and not np.array_equal(current, previous)  # the others move
    with qtbot.waitSignal(window.controller.session.job_finished, timeout=TIMEOUT_MS,
                          check_params_cb=lambda r: isinstance(r, SnapshotWritten)) as blocker:
        window.controller.export_snapshot(str(tmp_path))
    viewer = window.file_actions.open_snapshot(str(blocker.args[0].path))
    qtbot.addWidget(viewer)
    assert read_snapshot(blocker.args[0].path).step == 5
    assert viewer.table.item(0, 2).text() == "no grad"
