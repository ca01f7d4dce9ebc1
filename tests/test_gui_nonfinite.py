"""No figure reads a NaN/Inf gradient as a number: table, tree, details, graph tint, flow chart
and legends say NaN; Trace gradients after the bad step replays that step; the origin node
has its own marker."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
from PySide6.QtCore import QPointF
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QLabel

from gradexplorer.gui.graph.tint import NONFINITE
from gradexplorer.gui.text.number_text import format_number
from tests.gui_helpers import TIMEOUT_MS, open_model, wait_idle

NAN_MODEL = f"{Path(__file__).parent / 'data' / 'nan_sqrt_model.py'}:build"


def bad_step(qtbot, window):
    open_model(qtbot, window, NAN_MODEL, batch_size=None)
    window.controller.step()
    qtbot.waitUntil(lambda: window.controller.timeline.loss.x.size == 1, timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    return window.controller.timeline.latest_gradients.params


def traced(qtbot, window):
    """The graph panel once its gradients are traced (Trace gradients checked) and drawn."""
    panel = window.graph_panel
    panel.trace_grads_action.setChecked(True)
    qtbot.waitUntil(lambda: panel.drawing is not None
                    and panel.drawing.graph.graph.get("grad_traced"), timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    return panel


def test_nan_gradients_never_read_as_a_number(qtbot, make_window):
    window = make_window()
    params = bad_step(qtbot, window)
    bad = [name for name, s in params.items() if s.nan_count]
    assert "fc.weight" in bad
    table = window.table.table
    row = table.row_of("fc.weight")
    assert table.data(table.index(row, 1)) == "NaN"  # the finite part's norm is not shown
    assert table.data(table.index(row, 2)) == "NaN"
    assert table.data(table.index(row, 0), 8).rgba() == NONFINITE  # background: violet
    fc = window.tree._items["fc"]
    assert fc.text(4) == "NaN" and fc.text(5) == "NaN"
    assert fc.background(0).color().rgba() == NONFINITE
    panel = window.graph_panel
    drawing, fills = panel.drawing, panel.view.canvas.fills
    nodes = [i for i, p in enumerate(drawing.params) if p == "fc.weight"]
    assert nodes and all(fills[i] == NONFINITE for i in nodes)
    flow = window.gradients.flow
    rows = [flow.shown.index(name) for name in bad]
    zeros, _ = flow.zeros.getData()
    alarms_x, alarms_y = flow.alarms.getData()
    assert sorted(alarms_y.tolist()) == sorted(rows)  # each marked NaN/Inf...
    assert len(zeros) == 0  # ...and none as "exactly 0"
    assert "NaN/Inf" in window.gradients.flow_panel.legend.text()
    window.selection.select(param="fc.weight", module="fc", source="test")
    assert "norm\nNaN (no finite element)" in window.details.toPlainText()  # all 128 NaN


def test_every_column_spells_nan_the_same(qtbot, make_window):
    """The update-ratio column wrote ``nan`` where the norm and max |g| columns write ``NaN``."""
    window = make_window()
    params = bad_step(qtbot, window)
    assert math.isnan(params["fc.weight"].update_ratio)  # the bad update made the weights NaN
    table = window.table.table
    row = table.row_of("fc.weight")
    assert [table.data(table.index(row, c)) for c in (1, 2, 3)] == ["NaN", "NaN", "NaN"]
    assert format_number(math.inf) == "inf" and format_number(-math.inf) == "-inf"


def test_a_step_not_binned_never_reads_as_an_empty_column(qtbot, make_window):
    """The output layer's gradient is finite in step 1 of the NaN model and all NaN in step 2
    (the weights before it already NaN): nothing binned. The heat map drew step 2 as a column
    of zero counts, "no values"; it is marked not binned."""
    window = make_window()
    window.resize(1024, 700)
    bad_step(qtbot, window)
    window.controller.step()
    qtbot.waitUntil(lambda: window.controller.timeline.loss.x.size == 2, timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    window.selection.select(param="out.weight", module="out", source="test")
    heat = window.gradients.heatmap
    qtbot.waitUntil(lambda: heat.matrix is not None and len(heat.matrix.steps) == 2, timeout=TIMEOUT_MS)
    window.settle()
    matrix = heat.matrix
    assert not matrix.counts[1].any() and matrix.nonfinite[1] == 64  # all 4 × 16 NaN
    assert matrix.nonfinite[0] == 0 and matrix.counts[0].sum() == 64  # step 1: all binned
    image = heat.image.image  # rows: value bins, columns: steps
    assert np.isnan(image[:, 1]).all() and np.isfinite(image[:, 0]).all()
    assert heat.unbinned.isVisible() and heat.unbinned_key.isVisible()
    assert "NaN/Inf: not binned" in [label.text for _, label in heat.unbinned_key.items]
    # the key outside the image (inside the view box it hid the distribution from step 27 on)
    assert not heat.unbinned_key.sceneBoundingRect().intersects(heat.plotItem.vb.sceneBoundingRect())
    title = heat.plotItem.titleLabel  # nor over the title (it hid "histogram over steps")
    for width in (heat.width(), 700):  # the dock as it is, and widened: the title back
        heat.resize(width, heat.height())
        words = title.item.mapRectToScene(title.item.boundingRect()) if title.text else None
        assert words is None or not words.intersects(heat.unbinned_key.sceneBoundingRect())
    assert title.text.startswith("histogram over steps")
    (bottom, top) = heat.shown[0].rows[[0, -1]]
    middle = (bottom + top) / 2
    assert heat.describe_cell(2, middle) == "step 2: not binned (NaN/Inf) · 64 values"
    assert "not binned" not in heat.describe_cell(1, middle)
    heat.plotItem.vb.setRange(xRange=(0.5, 2.5), yRange=(bottom, top), padding=0)
    heat.repaint()
    upper = top - (top - bottom) / 8
    at = heat.mapFromScene(heat.plotItem.vb.mapViewToScene(QPointF(2, upper)))
    assert heat.grab().toImage().pixelColor(at).name() == QColor.fromRgba(NONFINITE).name()
    # the key's box follows a runtime theme switch (it stayed white on the dark plot)
    from gradexplorer.gui.theme import PLOT_COLOURS

    for theme in ("dark", "light"):
        window.set_theme(theme)
        assert heat.unbinned_key.opts["brush"].color().name() == QColor(PLOT_COLOURS[theme][0]).name()
        heat.show_readout("step 2 · [0, 1): 3 values")  # the theme's ink on the plot's colour
        assert heat.readout.color.name() == QColor(PLOT_COLOURS[theme][1]).name()
        assert heat.readout.fill.color().name() == QColor(PLOT_COLOURS[theme][0]).name()


def test_a_run_directory_keeps_each_steps_nan_inf_count_for_the_heat_map(tmp_path):
    """A followed run's heat map reads the same NaN/Inf counts as the live history."""
    import gradexplorer as gx
    from gradexplorer.core.runs.history import RunHistory
    from tests.data.nan_sqrt_model import build

    work = build()
    opt = torch.optim.SGD(work.model.parameters(), lr=0.1)
    with gx.watch(work.model, opt, tmp_path / "run", bins=16) as recorder:
        for step in range(2):
            x, target = work.make_batch(step)
            opt.zero_grad()
            work.loss_fn(work.model(x), target).backward()
            opt.step()
    live = recorder.monitor.history.histogram_matrix("out.weight")
    run = gx.open_run(tmp_path / "run")
    recorded = RunHistory(run).histogram_matrix("out.weight", run.steps)
    assert recorded.nonfinite.tolist() == live.nonfinite.tolist() == [0, 64]
    assert recorded.counts[0].sum() == 64 and not recorded.counts[1].any()


def test_the_graph_legend_names_every_mark(make_window):
    window = make_window()
    legend = window.graph_panel.findChild(QLabel, "legend").text()
    legend = legend.replace("&nbsp;", " ").replace("\u2060", "")  # word joiners: no width
    for mark in ("no gradient", "NaN/Inf", "born here", "hooked", "selected"):
        assert mark in legend


def test_trace_gradients_after_a_bad_step_replays_that_step(qtbot, make_window):
    window = make_window()
    bad_step(qtbot, window)
    panel = traced(qtbot, window)
    attrs = panel.drawing.graph.graph
    assert attrs["replayed"] and attrs["step"] == 0  # the bad step, not the next one
    assert "replay of step 1" in window.statusBar().currentMessage()
    # on the step's own weights (before its update made them NaN): the origin is ringed and
    # the gradient of the output layer, finite in the step, is finite in the replay too
    G = panel.drawing.graph
    names = [label[0] for label in panel.drawing.labels]
    assert panel.view.canvas.origin.tolist() == [names.index("SqrtBackward0")]
    assert G.graph["nonfinite_origin"] is not None
    out = [a for _, a in G.nodes(data=True) if (a.get("param") or "") == "out.weight"]
    assert out and all(a["grad_finite"] for a in out)
    assert not torch.isfinite(window.controller.session.live.session.model.fc.weight).all()  # own again


def test_the_replay_note_reads_whole_in_a_1024x700_window(qtbot, make_window):
    """It read "gradients traced on a replay of step 1, the first s…" at 1024×700."""
    window = make_window()
    window.resize(1024, 700)
    bad_step(qtbot, window)
    traced(qtbot, window)
    bar = window.statusBar()
    shown = bar.currentMessage()
    assert "replay of step 1" in shown and "NaN/Inf" in shown and "…" not in shown
    labels = [w for w in bar.findChildren(QLabel) if w.isVisible() and w.parent() is bar]
    room = min(w.x() for w in labels) - 2 - 6  # QStatusBar draws a message left of its labels
    assert bar.fontMetrics().horizontalAdvance(shown) <= room
    full = "gradients traced on a replay of step 1, the first step whose gradient held NaN/Inf"
    assert bar.toolTip() == full  # the whole sentence stays reachable
    assert full in window.events.item(window.events.count() - 1).text()
    bar.showMessage("something else")
    assert bar.toolTip() == ""  # the sentence goes with its message


def test_the_origin_node_has_its_own_marker(qtbot, make_window):
    window = make_window()
    open_model(qtbot, window, NAN_MODEL, batch_size=None)
    panel = traced(qtbot, window)
    names = [label[0] for label in panel.drawing.labels]
    assert panel.view.canvas.origin.tolist() == [names.index("SqrtBackward0")]
    window.selection.clear()  # the marker stays when the selection moves on
    assert panel.view.canvas.origin.tolist() == [names.index("SqrtBackward0")]
    assert not np.isin(panel.view.canvas.origin, panel.selected_nodes()).any()
