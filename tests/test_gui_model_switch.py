"""Opening another model resets every view: nothing of the last model's run stays."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gradexplorer.gui.graph.painting import base_fills
from gradexplorer.gui.graph.view import READABLE_SCALE
from tests.gui_helpers import TIMEOUT_MS, open_model, wait_idle


@pytest.fixture
def switched(qtbot, make_window):
    """A window that ran digits for 3 steps with fc1 selected, zoomed in, then opened LeNet."""
    window = make_window()
    open_model(qtbot, window, "example:digits")
    with qtbot.waitSignal(window.controller.timeline.changed, timeout=TIMEOUT_MS):
        window.controller.run(3)
    wait_idle(qtbot, window)
    window.selection.select(param="fc1.weight", module="fc1", source="test")
    window.graph_panel.view.zoom(3.0)
    window.graph_panel.search_edit.setText("fc1")
    before = window.graph_panel.drawing
    assert window.statusBar().loss_label.text() != "loss —"  # the run really showed
    open_model(qtbot, window, "example:lenet")
    qtbot.waitUntil(lambda: window.graph_panel.drawing is not before, timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    return window


def test_graph_and_its_tint_are_the_new_model_s(switched):
    panel = switched.graph_panel
    params = {p for p in panel.drawing.params if p}
    assert "conv1.weight" in params and "fc3.weight" in params
    assert np.array_equal(panel.view.canvas.fills, base_fills(panel.drawing))  # no old tint
    assert panel._stats == {}


def test_graph_is_fitted_again(switched):
    """The last model's zoom is gone: the new graph in its first view — whole, or where whole
    would make its labels unreadable (a short graph area: the Training dock keeps its plots'
    room), at the readable scale on its top — and fitted again on every resize."""
    view = switched.graph_panel.view
    assert view.fitted == view.first_view
    shown = view.mapToScene(view.viewport().rect()).boundingRect()
    whole = shown.contains(view.canvas.boundingRect().adjusted(10, 10, -10, -10))
    assert whole or math.isclose(view.scale_factor, READABLE_SCALE, rel_tol=1e-6), view.scale_factor


def test_selection_is_cleared(switched):
    selection = switched.selection.current
    assert (selection.node, selection.module, selection.param) == (None, None, None)
    assert switched.graph_panel.selected_nodes().tolist() == []
    assert switched.tree.selectedItems() == []


def test_status_bar_forgets_the_last_run(switched):
    bar = switched.statusBar()
    assert bar.step_label.text() == "step 0"
    assert bar.loss_label.text() == "loss —" and bar.rate_label.text() == "— steps/s"
    assert "example:lenet" in bar.model_label.text()


def test_plots_and_flow_chart_are_empty(switched):
    x, _ = switched.curves.loss_item.getData()
    assert x is None or len(x) == 0
    assert switched.gradients.flow._names == []
    assert len(switched.gradients.flow.peak_bars.opts["y"]) == 0
    assert switched.gradients.param == "conv1.weight"
    assert not switched.gradients.heatmap.has_data
    # no tick labels on an empty plot's value axis (in a short plot they piled up)
    empty = (switched.curves.loss_plot, switched.curves.norm_plot,
             switched.gradients.heatmap.plotItem, switched.gradients.histogram.plotItem)
    assert [p.getAxis("left").style["showValues"] for p in empty] == [False] * 4


def test_tables_and_details_show_the_new_model(switched):
    table = switched.table.table
    assert [row[0] for row in table.rows][:2] == ["conv1.weight", "conv1.bias"]
    assert table.stats == {} and all(table.data(table.index(r, 1)) == "" for r in range(len(table.rows)))
    assert {switched.tree.topLevelItem(0).child(i).text(0) for i in range(3)} >= {"conv1", "conv2"}
    assert "fc1.weight" not in switched.details.toPlainText()


def test_run_n_shows_step_k_of_n_with_time_left(qtbot, make_window):
    from gradexplorer.gui.window.status_bar import run_progress

    assert run_progress(57, (40, 20), 2.0, True) == "step 57 · 17 of 20 · ~2 s left"
    assert run_progress(57, (40, 20), 0.01, True) == "step 57 · 17 of 20 · ~5 min 00 s left"
    assert run_progress(57, None, 2.0, True) == "step 57" == run_progress(57, (40, 20), 2.0, False)
    window = make_window()
    open_model(qtbot, window, "example:digits")
    window.controller.run(5)
    model = window.controller.session
    qtbot.waitUntil(lambda: model.state == "idle" and model.live.session.step_count == 5,
                    timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    window.flush_redraws()
    assert window.controller.run_span == (0, 5)
    assert window.statusBar().step_label.text() == "step 5"  # the run is over


def test_reset_model_starts_the_same_model_again(qtbot, make_window):
    window = make_window()
    open_model(qtbot, window, "example:digits")
    first = [p.detach().clone() for p in window.controller.session.live.session.model.parameters()]
    window.controller.run(3)
    qtbot.waitUntil(lambda: window.controller.session.live.session.step_count == 3
                    and window.controller.session.state == "idle", timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    before = window.controller.session.live
    window.menus.reset_action.trigger()
    qtbot.waitUntil(lambda: window.controller.session.live is not before
                    and window.controller.session.state == "idle", timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    live = window.controller.session.live
    assert live.spec == "example:digits" and live.session.step_count == 0
    assert live.options == before.options
    again = list(live.session.model.parameters())
    assert all((a == b).all() for a, b in zip(first, again, strict=True))  # same seed, same start
    assert window.statusBar().step_label.text() == "step 0"
