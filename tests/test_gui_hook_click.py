"""A hook click updates the graph in place: two hook nodes, no trace, no relayout."""

from __future__ import annotations

import numpy as np

from gradexplorer.gui.models.session import GraphTraced
from tests.gui_helpers import TIMEOUT_MS, open_model, wait_idle


def test_hook_click_adds_and_removes_hook_nodes_in_place(qtbot, make_window):
    window = make_window()
    open_model(qtbot, window)
    panel, controller = window.graph_panel, window.controller
    before = panel.drawing
    traces = []
    controller.job_finished.connect(lambda r: traces.append(r) if isinstance(r, GraphTraced) else None)
    with qtbot.waitSignal(controller.hooks_changed, timeout=TIMEOUT_MS):
        controller.attach_hook("fc1", "observe")
    wait_idle(qtbot, window)
    after = panel.drawing
    hooks = [i for i, label in enumerate(after.labels) if label == ("backward hook", "fc1")]
    assert len(hooks) == 2 and len(after) == len(before) + 2 and not traces
    kept = np.array([after.index[n] for n in before.ids])
    assert np.array_equal(after.xy[kept], before.xy)  # every other node stays where it was
    assert set(np.flatnonzero(np.isin(np.arange(len(after)), panel.view.canvas.marked))) >= set(hooks)
    with qtbot.waitSignal(controller.hooks_changed, timeout=TIMEOUT_MS):
        controller.detach_hook("fc1")
    wait_idle(qtbot, window)
    assert len(panel.drawing) == len(before) and not traces
    assert sorted(panel.graph.edges) == sorted(before.graph.edges)


def test_hook_click_in_the_module_view_lays_out_without_a_trace(qtbot, make_window):
    window = make_window()
    open_model(qtbot, window)
    panel, controller = window.graph_panel, window.controller
    panel.detail_box.setCurrentIndex(1)  # one node per top-level module
    panel._detail_changed()
    wait_idle(qtbot, window)
    before = dict(zip(panel.drawing.modules, panel.drawing.labels, strict=True))["fc1"][1]
    traces = []
    controller.job_finished.connect(lambda r: traces.append(r) if isinstance(r, GraphTraced) else None)
    with qtbot.waitSignal(controller.hooks_changed, timeout=TIMEOUT_MS):
        controller.attach_hook("fc1", "observe")
    wait_idle(qtbot, window)
    fc1 = next(i for i, m in enumerate(panel.drawing.modules) if m == "fc1")
    assert (before, panel.drawing.labels[fc1][1]) == ("Linear · 4 nodes", "Linear · 6 nodes")  # + 2 hooks
    assert not traces and panel.view.canvas.marked.tolist() == [fc1]
