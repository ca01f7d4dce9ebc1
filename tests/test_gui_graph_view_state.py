"""The graph view's settings live in a Qt-free GraphViewState (issue 20, item 4): the panel's
controls show and set it, a change does what the control did, whoever made it."""

from __future__ import annotations

import numpy as np

from gradexplorer.gui.graph.painting import base_fills
from gradexplorer.gui.models.graph_view import GraphViewState
from tests.gui_helpers import TIMEOUT_MS, open_model, wait_idle


def test_the_state_announces_changes_only():
    state, seen = GraphViewState(), []
    state.layout_changed.connect(lambda name: seen.append(("layout", name)))
    state.detail_changed.connect(lambda depth, auto: seen.append(("detail", depth, auto)))
    state.tint_changed.connect(lambda on: seen.append(("tint", on)))
    state.trace_grads_changed.connect(lambda on: seen.append(("trace", on)))
    state.hook_nodes_changed.connect(lambda on: seen.append(("hooks", on)))
    state.layout = "layered"  # unchanged: no event
    state.tint = True
    state.layout, state.tint, state.trace_grads, state.hook_nodes = "spring", False, True, False
    state.detail = 2
    state.show_chosen_detail(3)
    state.show_chosen_detail(3)
    assert seen == [("layout", "spring"), ("tint", False), ("trace", True), ("hooks", False),
                    ("detail", 2, False), ("detail", 3, True)]
    assert (state.layout, state.detail, state.tint, state.trace_grads, state.hook_nodes) == (
        "spring", 3, False, True, False)


def count_relayouts(monkeypatch, panel) -> list:
    calls, relayout = [], panel.relayout
    monkeypatch.setattr(panel, "relayout", lambda fit=False: (calls.append(fit), relayout(fit))[1])
    return calls


def test_state_changes_show_in_the_controls_and_act_on_the_graph(qtbot, make_window, monkeypatch):
    window = make_window()
    open_model(qtbot, window)
    panel, state = window.graph_panel, window.graph_panel.view_state
    relayouts = count_relayouts(monkeypatch, panel)
    state.tint = False
    assert not panel.tint_action.isChecked()
    window.settle()
    assert np.array_equal(panel.view.canvas.fills, base_fills(panel.drawing))  # by kind
    panel.tint_action.setChecked(True)  # the control sets the state
    assert state.tint
    state.layout = "spring"
    assert panel.layout_box.currentText() == "spring" and relayouts == [False]
    wait_idle(qtbot, window)
    panel.layout_box.activated.emit(panel.layout_box.findText("shell"))
    assert state.layout == "shell" and len(relayouts) == 2
    wait_idle(qtbot, window)
    panel.hook_nodes_action.setChecked(False)
    assert not state.hook_nodes and len(relayouts) == 3
    wait_idle(qtbot, window)
    state.detail = 1
    assert panel.detail_box.currentIndex() == 1 and relayouts[-1] is True  # fitted afresh
    wait_idle(qtbot, window)
    assert panel.drawing.graph.graph.get("collapsed", {}).get("depth") == 1
    with qtbot.waitSignal(panel.refresh_requested, timeout=TIMEOUT_MS):
        state.trace_grads = True  # a re-trace, with every op's gradient
    assert panel.trace_grads_action.isChecked()
    qtbot.waitUntil(lambda: bool(panel.graph.graph.get("grad_traced")), timeout=TIMEOUT_MS)


def test_the_detail_level_a_layout_chooses_is_the_states_without_a_second_layout(
        qtbot, make_window, monkeypatch):
    window = make_window()
    panel = window.graph_panel
    relayouts = count_relayouts(monkeypatch, panel)
    open_model(qtbot, window, "example:deep:blocks=120")  # over the readable limit: collapsed
    assert panel.view_state.detail == 1 and panel.detail_box.currentIndex() == 1
    assert relayouts == [True]  # the new model's one layout, nothing after it chose depth 1
