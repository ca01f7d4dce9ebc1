"""A hook click updates the graph without a trace: two hook nodes, laid out where a fresh
layout of the new graph puts them (a small graph), or inserted in place (a big one)."""

from __future__ import annotations

import numpy as np
import pytest

from gradexplorer.core.graph.style import NODE_H, NODE_W
from gradexplorer.gui.graph.panel import RELAYOUT_MOST
from gradexplorer.gui.models.session import GraphTraced
from tests.gui_helpers import TIMEOUT_MS, open_model, wait_idle
from tests.screenshot_helpers import ROOT


def fresh_positions(panel) -> dict:
    """Node id -> position in a fresh layout of the panel's graph as it is now."""
    from gradexplorer.gui.graph.core_api import layout_graph
    from gradexplorer.gui.graph.layout_worker import lay_out

    drawing = lay_out(panel.graph, panel.view_state.layout, layout_graph,
                      panel._collapser()).drawing
    return {node: tuple(drawing.xy[i]) for i, node in enumerate(drawing.ids)}


def show_every_operation(qtbot, window) -> None:
    """Detail level "Operations" (big models open collapsed), laid out."""
    panel = window.graph_panel
    panel.view_state.detail = None
    qtbot.waitUntil(lambda: panel.drawing is not None and not panel.busy()
                    and panel.drawing.graph.graph.get("collapsed", {}).get("depth") is None,
                    timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)


def shown_positions(panel) -> dict:
    return {node: tuple(panel.drawing.xy[i]) for i, node in enumerate(panel.drawing.ids)}


@pytest.mark.parametrize("spec, module", [("example:digits", "fc1"), ("example:lenet", "fc1"),
                                          ("example:resnet18", "layer1.0"),
                                          ("examples/gpt2_small.py:build", "transformer.h.0")])
def test_hook_nodes_go_where_a_fresh_layout_puts_them(qtbot, make_window, spec, module, monkeypatch):
    monkeypatch.chdir(ROOT)  # the spec as a user in the checkout writes it, from any test cwd
    window = make_window()
    open_model(qtbot, window, spec, batch_size=2)
    panel, controller = window.graph_panel, window.controller
    show_every_operation(qtbot, window)
    traces = []
    controller.session.job_finished.connect(
        lambda r: traces.append(r) if isinstance(r, GraphTraced) else None)
    assert len(panel.graph) <= RELAYOUT_MOST
    for change, attached in ((lambda: controller.attach_hook(module, "block"), True),
                             (lambda: controller.detach_hook(module), False)):
        with qtbot.waitSignal(controller.session.hooks_changed, timeout=TIMEOUT_MS):
            change()
        wait_idle(qtbot, window)
        assert shown_positions(panel) == fresh_positions(panel)  # no node drawn over another
        hooks = [label for label in panel.drawing.labels if label == ("backward hook", module)]
        assert bool(hooks) == attached
    assert not traces  # never a trace


def test_a_big_graph_gets_hook_nodes_in_place(qtbot, make_window):
    window = make_window()
    open_model(qtbot, window, "example:deep:blocks=600")
    panel, controller = window.graph_panel, window.controller
    show_every_operation(qtbot, window)
    assert len(panel.graph) > RELAYOUT_MOST
    before = panel.drawing
    traces = []
    controller.session.job_finished.connect(
        lambda r: traces.append(r) if isinstance(r, GraphTraced) else None)
    with qtbot.waitSignal(controller.session.hooks_changed, timeout=TIMEOUT_MS):
        controller.attach_hook("blocks.3", "observe")
    wait_idle(qtbot, window)
    after = panel.drawing
    hooks = [i for i, label in enumerate(after.labels) if label == ("backward hook", "blocks.3")]
    assert len(hooks) == 2 and len(after) == len(before) + 2 and not traces
    kept = np.array([after.index[n] for n in before.ids])
    assert np.array_equal(after.xy[kept], before.xy)  # every other node stays where it was
    for h in hooks:  # and no box is drawn over another's
        others = np.delete(after.xy, h, axis=0)
        apart = np.abs(others - after.xy[h])
        assert not ((apart[:, 0] < NODE_W) & (apart[:, 1] < NODE_H)).any()
    assert set(np.flatnonzero(np.isin(np.arange(len(after)), panel.view.canvas.marked))) >= set(hooks)
    with qtbot.waitSignal(controller.session.hooks_changed, timeout=TIMEOUT_MS):
        controller.detach_hook("blocks.3")
    wait_idle(qtbot, window)
    assert len(panel.drawing) == len(before) and not traces
    assert sorted(panel.graph.edges) == sorted(before.graph.edges)


def test_hook_click_in_the_module_view_lays_out_without_a_trace(qtbot, make_window):
    window = make_window()
    open_model(qtbot, window)
    panel, controller = window.graph_panel, window.controller
    panel.view_state.detail = 1  # one node per top-level module
    wait_idle(qtbot, window)
    before = dict(zip(panel.drawing.modules, panel.drawing.labels, strict=True))["fc1"][1]
    traces = []
    controller.session.job_finished.connect(
        lambda r: traces.append(r) if isinstance(r, GraphTraced) else None)
    with qtbot.waitSignal(controller.session.hooks_changed, timeout=TIMEOUT_MS):
        controller.attach_hook("fc1", "observe")
    wait_idle(qtbot, window)
    fc1 = next(i for i, m in enumerate(panel.drawing.modules) if m == "fc1")
    assert (before, panel.drawing.labels[fc1][1]) == ("Linear · 4 nodes", "Linear · 6 nodes")  # + 2 hooks
    assert not traces and panel.view.canvas.marked.tolist() == [fc1]
