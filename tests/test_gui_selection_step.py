"""One selection (parameter and step) that every view reads (issue 40 item 1): a parameter
clicked mid-training never shows another's histogram under its name; a spike, a heat-map
column or a curve point moves the whole window to that step, said "step N of M"; End returns
every view to the newest step."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QEvent, QObject, QPoint, QPointF, Qt

import gradexplorer as gx
from tests.gui_helpers import TIMEOUT_MS, open_model, wait_idle
from tests.spike_helpers import train as spike_train
from tests.test_gui_step_forensics import INJECT, click_marker


class PaintCheck(QObject):
    """Calls ``check()`` at every paint of a widget's viewport; counts them."""

    def __init__(self, widget, check) -> None:
        super().__init__()
        self.check, self.paints, self.failures = check, 0, []
        widget.viewport().installEventFilter(self)

    def eventFilter(self, _obj, event) -> bool:  # noqa: N802 - Qt API
        if event.type() == QEvent.Paint:
            self.paints += 1
            problem = self.check()
            if problem:
                self.failures.append(problem)
        return False


def histogram_problem(window) -> str | None:
    """What is wrong with the histogram painted now: drawn for another parameter than its title
    and the selection name, or not that parameter's histogram at the step it says."""
    panel, plot = window.gradients, window.gradients.histogram
    name, step = plot.drawn
    wanted = window.selection.current.param
    if name != wanted or plot._title_parts[1] != wanted or panel.param_label.name != wanted:
        return f"drew {name!r} under {plot._title_parts[1]!r} with {wanted!r} selected"
    if plot.current is None:
        return None
    timeline = window.controller.timeline
    record = next((g for g in timeline.gradients if g.step == step), None)
    if record is None and timeline.latest is not None and step < timeline.latest.step:
        # the whole-run history thinned this step out after the plot drew it: a starved GUI
        # thread may paint once more before the throttled redraw brings the newest step (the
        # name checks above still hold; nothing is left to compare the drawn histogram with)
        return None
    if record is None or record.histograms.get(name) is not plot.current:
        return f"{name!r}: the histogram drawn is not step {step}'s"
    x, y = plot.current_item.getData()
    if not np.array_equal(x, np.asarray(plot.current.edges, dtype=float)):
        return f"{name!r}: the curve's data is not the histogram said"
    return None


def click_table_row(qtbot, window, name: str) -> None:
    table = window.table
    index = table.proxy.mapFromSource(table.table.index(table.table.row_of(name), 0))
    table.scrollTo(index)
    qtbot.mouseClick(table.viewport(), Qt.LeftButton, pos=table.visualRect(index).center())


def click_heatmap_column(qtbot, window, step: int) -> None:
    heatmap = window.gradients.heatmap
    heatmap.grab()  # painted as a user sees it: the view's range follows the image (lazily)
    rows = heatmap.shown[0].rows
    scene = heatmap.plotItem.vb.mapViewToScene(QPointF(step, float(rows[0] + rows[-1]) / 2))
    where = heatmap.mapFromScene(scene)
    qtbot.mouseClick(heatmap.viewport(), Qt.LeftButton, pos=QPoint(where.x(), where.y()))


def test_a_parameter_clicked_mid_training_never_paints_another_ones_histogram(qtbot, make_window):
    window = make_window()
    open_model(qtbot, window, "example:digits", batch_size=16)
    names = [row[0] for row in window.table.table.rows]
    a, b = names[0], names[-2]
    window.selection.select(param=a, module=a.rpartition(".")[0], source="test")
    timeline = window.controller.timeline
    window.controller.run(None)  # training in the worker while the clicks land
    qtbot.waitUntil(lambda: timeline.latest is not None and timeline.latest.step >= 3,
                    timeout=TIMEOUT_MS)
    window.gradients.raise_()
    check = PaintCheck(window.gradients.histogram, lambda: histogram_problem(window))
    for name in (b, a, b):
        click_table_row(qtbot, window, name)
        assert window.selection.current.param == name
        assert window.gradients.histogram.drawn[0] == name  # before any paint: already its own
        assert histogram_problem(window) is None
        start = timeline.latest.step
        qtbot.waitUntil(lambda s=start: timeline.latest.step >= s + 2, timeout=TIMEOUT_MS)
    window.controller.stop()
    wait_idle(qtbot, window)
    assert check.paints > 0 and check.failures == []
    assert window.gradients.histogram.drawn == (b, timeline.latest.step)
    # an older step by a click on its heat-map column: its histogram, said "step k of N"
    held = window.gradients.heatmap.shown[1].astype(int).tolist()
    older, newest = held[1], timeline.latest.step
    click_heatmap_column(qtbot, window, older)
    assert window.selection.current.step == older
    assert window.gradients.histogram.drawn == (b, older)
    record = next(g for g in timeline.gradients if g.step == older)
    assert window.gradients.histogram.current is record.histograms[b]
    caption = f"step {older} of {newest}"
    assert caption in window.gradients.histogram.plotItem.titleLabel.text
    assert window.gradients.step_label.text() == caption
    assert f"at {caption}" in window.details.toPlainText()
    assert window.step_follow.status_label.text().startswith(f"viewing {caption}")
    assert window.table.table.stats[b] is record.params[b]
    assert window.gradients.heatmap.step_line.isVisible()
    assert window.gradients.heatmap.step_line.value() == older
    qtbot.keyClick(window, Qt.Key_End)  # back to live
    assert window.selection.current.step is None
    assert window.gradients.histogram.drawn == (b, newest)
    assert "step" not in window.gradients.histogram.plotItem.titleLabel.text.split("·")[0]
    assert not window.step_follow.status_label.isVisible()
    assert not window.gradients.heatmap.step_line.isVisible()
    assert window.table.table.stats[b] is timeline.latest_gradients.params[b]


def test_a_spike_click_moves_every_view_to_its_step_and_end_returns(qtbot, make_window, tmp_path):
    spike_train(tmp_path / "run", 60, inject=INJECT)
    run = gx.open_run(tmp_path / "run")
    window = make_window()
    assert window.file_actions.open_run(str(tmp_path / "run")) is not None
    qtbot.waitUntil(lambda: window.graph_panel.drawing is not None, timeout=TIMEOUT_MS)
    window.settle()
    window.forensics.spike_markers.refresh()
    click_marker(qtbot, window, window.curves.norm_plot, INJECT)
    qtbot.waitUntil(lambda: window.forensics.spike_panel.shown is not None, timeout=TIMEOUT_MS)
    first = run.spike_events()[0].ranking[0]["name"]
    caption = f"step {INJECT} of 60"
    assert window.selection.current.step == INJECT and window.selection.current.param == first
    figures = run.figures(INJECT)
    table = window.table.table
    assert {n: s.norm for n, s in table.stats.items()} == {n: f["norm"] for n, f in figures.items()}
    row = table.row_of(first)
    assert table.data(table.index(row, 1)) == f"{figures[first]['norm']:.3g}"
    assert f"at {caption}" in window.details.toPlainText()
    histogram = window.gradients.histogram
    assert histogram.drawn == (first, INJECT)
    assert np.array_equal(histogram.current.counts, run.histograms(INJECT)[first].counts)
    assert caption in histogram.plotItem.titleLabel.text
    heatmap = window.gradients.heatmap
    assert heatmap.step_line.isVisible() and heatmap.step_line.value() == INJECT
    ledger = window.forensics.ledger_panel
    assert ledger.pinned == INJECT and f"at {caption}" in ledger.details.text()
    assert window.distributions.grid.model.step == INJECT
    assert caption in window.distributions.grid.count.text()
    assert window.step_follow.live_action.isEnabled()
    window.step_follow.live_action.trigger()  # the toolbar's Live (End)
    assert window.selection.current.step is None
    newest = run.figures(60)
    assert {n: s.norm for n, s in table.stats.items()} == {n: f["norm"] for n, f in newest.items()}
    assert histogram.drawn == (first, 60) and not heatmap.step_line.isVisible()
    assert ledger.pinned is None and "optimizer step: 60" in ledger.details.text()
    assert "at step" not in window.details.toPlainText()
    assert not window.forensics.spike_panel.holds_tint()
    run.close()


def test_a_heat_map_column_older_than_the_history_shows_that_steps_histogram(
        qtbot, make_window, tmp_path, monkeypatch):
    from gradexplorer.gui.runs import run_view

    monkeypatch.setattr(run_view, "HISTORY", 8)  # the views hold steps 13..20; the heat map all
    spike_train(tmp_path / "run", 20)
    run = gx.open_run(tmp_path / "run")
    window = make_window()
    assert window.file_actions.open_run(str(tmp_path / "run")) is not None
    window.settle()
    window.selection.select(param="body.weight", module="body", source="test")
    window.settle()
    assert 5 not in window.controller.timeline.gradients.steps()
    click_heatmap_column(qtbot, window, 5)
    assert window.selection.current.step == 5
    histogram = window.gradients.histogram
    assert histogram.drawn == ("body.weight", 5)
    expected = run.histograms(5)["body.weight"]
    assert np.array_equal(histogram.current.counts, expected.counts)
    assert np.array_equal(histogram.current.edges, expected.edges)
    assert "step 5 of 20" in histogram.plotItem.titleLabel.text
    table = window.table.table
    assert table.stats["body.weight"].norm == run.figures(5)["body.weight"]["norm"]
    # a click on a point of the loss curve: the window at that step
    plot = window.curves.loss_plot
    window.curves.plots.grab()
    scene = plot.vb.mapViewToScene(QPointF(12, float(window.controller.timeline.loss.y[11])))
    where = window.curves.plots.mapFromScene(scene)
    qtbot.mouseClick(window.curves.plots.viewport(), Qt.LeftButton, pos=QPoint(where.x(), where.y()))
    assert window.selection.current.step == 12
    assert histogram.drawn == ("body.weight", 12)
    assert table.stats["body.weight"].norm == run.figures(12)["body.weight"]["norm"]
    run.close()


def test_traced_gradients_and_sparse_histograms_say_their_step(qtbot, make_window):
    from gradexplorer.gui.graph.trace_tint import is_traced
    from tests.gui_helpers import click_node, node_index

    window = make_window()
    open_model(qtbot, window, "example:digits", batch_size=16)
    panel = window.graph_panel
    panel.trace_grads_action.setChecked(True)
    qtbot.waitUntil(lambda: panel.drawing is not None and is_traced(panel.drawing), timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    click_node(qtbot, window, node_index(panel.drawing, "AddmmBackward0", "fc1"))
    text = window.details.toPlainText()
    assert "gradient out ‖g‖" in text and "traced\tstep 1 (Trace gradients)" in text.replace("\n", "\t")
    window.controller.run(3)
    qtbot.waitUntil(lambda: window.controller.timeline.newest_step == 3, timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    assert "step 1 (Trace gradients); the figures below are step 3's" in window.details.toPlainText()
    assert "traced at step 1" in panel.busy_label.text()  # the graph's too (whole in its tip)
    assert "gradients of step 1 (Trace gradients)" in panel.busy_label.toolTip()
    # histograms every 5: the tiles show one step's figures with that step's histograms, said
    window.controller.set_histogram_every(5)
    wait_idle(qtbot, window)
    window.controller.run(5)
    qtbot.waitUntil(lambda: window.controller.timeline.newest_step == 8, timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    grid = window.distributions.grid
    record = next(g for g in window.controller.timeline.gradients if g.step == 5)
    assert grid.model.step == 5 and grid.model.params is record.params
    assert grid.model.histograms is record.histograms and "step 5 of 8" in grid.count.text()
    assert window.gradients.histogram.drawn[1] == 5
    assert "step 5 of 8" in window.gradients.histogram.plotItem.titleLabel.text
