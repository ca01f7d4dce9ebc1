"""The app's step ledger, optimizer state, spike markers and run divergence (issues 19, 23)."""

from __future__ import annotations

import numpy as np
import torch
from PySide6.QtCore import QPoint, QPointF, Qt
from torch import nn

import gradexplorer as gx
from gradexplorer.core.model.spec import ModelOptions
from gradexplorer.core.session.engine import SessionConfig
from gradexplorer.gui.plots.spike_markers import SIZE
from tests.gui_helpers import TIMEOUT_MS, wait_idle  # noqa: F401
from tests.spike_helpers import train as spike_train
from tests.watched_loop import clipped_run

INJECT = 50


def click_marker(qtbot, window, plot, step: int) -> None:
    """A real mouse click on the spike marker at ``step`` in ``plot``."""
    item = window.forensics.spike_markers.items["loss" if plot is window.curves.loss_plot else "norm"]
    spot = next(p for p in item.points() if p.pos().x() == step)
    scene = item.mapToScene(spot.pos())
    view = window.curves.plots
    where = view.mapFromScene(QPointF(scene))
    qtbot.mouseClick(view.viewport(), Qt.LeftButton, pos=QPoint(where.x(), where.y()))


def trained_window(qtbot, make_window, spec, options, config, steps: int = 3):
    """A window that opened ``spec`` and trained ``steps`` steps in its live session, idle."""
    window = make_window()
    window.controller.open_model(spec, options, config)
    qtbot.waitUntil(lambda: window.controller.session.live is not None
                    and window.graph_panel.drawing is not None, timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    window.controller.run(steps)
    qtbot.waitUntil(lambda: window.controller.timeline.latest is not None
                    and window.controller.timeline.latest.step == steps, timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    return window


def node_fill(window, param: str) -> int:
    drawing = window.graph_panel.drawing
    index = next(i for i, p in enumerate(drawing.params) if p == param)
    return int(window.graph_panel.view.canvas.fills[index])


def test_a_followed_clipped_run_shows_its_ledger_and_optimizer_state(qtbot, make_window, tmp_path):
    clipped_run(tmp_path / "run")
    run = gx.open_run(tmp_path / "run")
    window = make_window()
    assert window.file_actions.open_run(str(tmp_path / "run")) is not None
    window.settle()
    ledger = run.step_ledger(6)
    assert ledger.clipped and ledger.grad_norm_accumulated > 10 * ledger.grad_norm_applied
    text = window.forensics.ledger_panel.details.text()
    assert "optimizer step: 6" in text
    assert f"global norm as accumulated: {ledger.grad_norm_accumulated:.6g}" in text
    assert f"global norm as applied: {ledger.grad_norm_applied:.6g}" in text
    assert "(clipped)" in text and "last 6 steps: clipped 100% · 0 skipped" in text
    steps, acc, applied = window.controller.timeline.ledger.series()
    assert steps == [1, 2, 3, 4, 5, 6]
    assert acc == [run.step_ledger(s).grad_norm_accumulated for s in range(1, 7)]
    assert np.allclose(applied, 0.1, rtol=1e-5)
    x, y = window.forensics.ledger_panel.accumulated.getData()
    assert list(y) == acc
    # the optimizer's state: hidden columns of the parameter table, the run's figures exactly
    table = window.table.table
    state = run.optimizer_state(6)["0.weight"]
    optim = [c for c in range(table.columnCount()) if table.headerData(c, Qt.Horizontal) == "‖m‖"]
    assert window.table.isColumnHidden(optim[0])  # hidden until asked for
    window.forensics.optimizer_columns_action.trigger()  # View → Optimizer columns
    assert not window.table.isColumnHidden(optim[0])
    row = table.row_of("0.weight")
    cells = {table.headerData(c, Qt.Horizontal): table.data(table.index(row, c))
             for c in range(table.columnCount())}
    assert cells["‖m‖"] == f"{state.exp_avg_norm:.3g}"
    assert cells["RMS √v̂"] == f"{state.exp_avg_sq_rms:.3g}"
    assert cells["eff. lr"] == f"{state.effective_lr:.3g}"
    assert cells["lr"] == "0.01"
    run.close()


def test_live_session_fills_the_ledger_and_the_optimizer_state(qtbot, make_window):
    window = trained_window(qtbot, make_window, "example:digits", ModelOptions(batch_size=16),
                            SessionConfig(device="cpu", optimizer="sgd", momentum=0.9))
    timeline = window.controller.timeline
    assert [led.optimizer_step for led in timeline.ledger.ledgers] == [1, 2, 3]
    latest = timeline.ledger.latest
    assert latest.grad_norm_applied == timeline.norm.y[-1]
    assert "optimizer step: 3" in window.forensics.ledger_panel.details.text()
    assert "scale: none (no GradScaler)" in window.forensics.ledger_panel.details.text()
    session = window.controller.session.live.session
    name, param = next(iter(session.model.named_parameters()))
    buf = session.optimizer.state[param]["momentum_buffer"]
    expected = float(np.linalg.norm(buf.detach().double().numpy()))
    assert timeline.ledger.optimizer_state[name].momentum_norm == expected


def test_clicking_a_spike_marker_opens_its_onset_ranking(qtbot, make_window, tmp_path):
    spike_train(tmp_path / "run", 60, inject=INJECT)
    run = gx.open_run(tmp_path / "run")
    events = run.spike_events()
    assert [e.step for e in events] == [INJECT]
    window = make_window()
    assert window.file_actions.open_run(str(tmp_path / "run")) is not None
    qtbot.waitUntil(lambda: window.graph_panel.drawing is not None, timeout=TIMEOUT_MS)
    window.settle()
    window.forensics.spike_markers.refresh()
    markers = window.forensics.spike_markers.items["loss"]
    assert [p.pos().x() for p in markers.points()] == [INJECT]
    loss_at = run.step_info(INJECT)["loss"]
    assert markers.points()[0].pos().y() == loss_at
    click_marker(qtbot, window, window.curves.norm_plot, INJECT)
    qtbot.waitUntil(lambda: window.forensics.spike_panel.shown is not None, timeout=TIMEOUT_MS)
    event = events[0]
    first = event.ranking[0]["name"]
    assert first.startswith("side.")
    ranking = window.forensics.spike_panel.ranking
    assert [ranking.topLevelItem(i).text(1) for i in range(ranking.topLevelItemCount())] == \
        [r["name"] for r in event.ranking]
    assert window.selection.current.param == first
    assert window.selection.current.module == "side"
    assert window.forensics.ledger_panel.pinned == INJECT
    assert "optimizer step: 50" in window.forensics.ledger_panel.details.text()
    line = window.forensics.spike_markers.lines[0]
    assert line.isVisible() and line.value() == INJECT
    # the graph is tinted by onset: the first to move hottest, a parameter that did not move palest
    ranked = [r["name"] for r in event.ranking]
    coolest = next((row[0] for row in window.table.table.rows if row[0] not in ranked), ranked[-1])
    assert node_fill(window, first) != node_fill(window, coolest)
    heat = {n: s.norm for n, s in window.graph_panel._stats.items()}
    assert heat[first] == max(heat.values()) > heat[coolest]
    window.forensics.spike_panel.live_tint()  # the tint of the step shown: the spike's
    assert window.graph_panel._stats[first].norm == run.figures(INJECT)[first]["norm"]
    window.step_follow.live_action.trigger()  # End: every view back to the newest step
    assert window.graph_panel._stats[first].norm == run.figures(60)[first]["norm"]
    click_marker(qtbot, window, window.curves.loss_plot, INJECT)  # the loss curve's marker too
    assert window.forensics.spike_panel.shown is not None and window.forensics.spike_panel._held
    spike_train(tmp_path / "quiet", 20)  # another run opened: the event no longer applies
    assert window.file_actions.open_run(str(tmp_path / "quiet")) is not None
    window.settle()
    assert window.forensics.spike_panel.shown is None and not window.forensics.spike_panel._held
    assert window.forensics.spike_panel.ranking.topLevelItemCount() == 0
    assert window.forensics.spike_markers.items["loss"].points().size == 0
    run.close()


def test_compare_runs_opens_the_divergence_the_same_way(qtbot, make_window, tmp_path):
    spike_train(tmp_path / "a", 30)
    spike_train(tmp_path / "b", 30, inject=12)
    window = make_window()
    divergence = window_divergence(window, tmp_path)
    assert divergence.step == 12
    first = divergence.ranking[0]["name"]
    ranking = window.forensics.spike_panel.ranking
    assert ranking.topLevelItem(0).text(1) == first
    assert window.selection.current.param == first
    assert window.forensics.ledger_panel.pinned == 12
    assert "part at step 12" in window.forensics.spike_panel.heading.text()
    heat = {n: s.norm for n, s in window.graph_panel._stats.items()}  # the graph tinted by gap
    assert all(heat[r["name"]] == r["gap"] for r in divergence.ranking)
    # an unrelated folder is one line in a dialog, never a traceback
    errors = []
    window.show_error = errors.append
    assert window.forensics.show_divergence(tmp_path / "a", tmp_path / "nothing") is None
    assert len(errors) == 1 and "\n" not in errors[0]


def window_divergence(window, tmp_path):
    return window.forensics.show_divergence(tmp_path / "a", tmp_path / "b")


def test_live_spike_markers_open_the_event(qtbot, make_window):
    window = trained_window(qtbot, make_window, "example:mlp", ModelOptions(),
                            SessionConfig(device="cpu", lr=1e30))  # NaN from step 2
    events = window.controller.timeline.ledger.events()
    assert [e.step for e in events] == [2]
    markers = window.forensics.spike_markers.items["norm"]
    assert [p.pos().x() for p in markers.points()] == [2]
    assert marker_inset(window.curves.norm_plot, markers) >= SIZE / 2  # whole, inside the view
    click_marker(qtbot, window, window.curves.norm_plot, 2)
    qtbot.waitUntil(lambda: window.forensics.spike_panel.shown is events[0], timeout=TIMEOUT_MS)
    assert window.forensics.spike_panel.heading.text().startswith("Spike step 2")
    if events[0].ranking:
        assert window.selection.current.param == events[0].ranking[0]["name"]
    top = window.curves.norm_plot.vb.viewRange()[1][1]
    window.curves.norm_plot.setYRange(0, 10 * abs(top) + 10, padding=0)  # a NaN marker follows
    qtbot.waitUntil(lambda: marker_inset(window.curves.norm_plot, markers) >= SIZE / 2,
                    timeout=TIMEOUT_MS)


def marker_inset(plot, markers) -> float:
    """Pixels from the top of ``plot``'s view down to the centre of its first marker."""
    vb = plot.vb
    centre = vb.mapViewToScene(markers.points()[0].pos())
    return centre.y() - vb.sceneBoundingRect().top()


def test_a_zero_weight_update_ratio_reads_new(qtbot, make_window, tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 2))
    nn.init.zeros_(model[2].bias)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gx.watch(model, opt, tmp_path / "run", bins=8):
        x = torch.randn(16, 6, generator=torch.Generator().manual_seed(0))
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
    run = gx.open_run(tmp_path / "run")
    assert run.figures(1)["2.bias"]["update_ratio"] == float("inf")
    run.close()
    window = make_window()
    assert window.file_actions.open_run(str(tmp_path / "run")) is not None
    window.settle()
    table = window.table.table
    row = table.row_of("2.bias")
    assert table.data(table.index(row, 3)) == "new (θ was 0)"
    window.selection.select(param="2.bias", module="2", source="test")
    window.settle()
    assert "new (θ was 0)" in window.details.toPlainText()
    assert "inf" not in table.data(table.index(row, 3))


def test_open_command_opens_a_spike_or_a_divergence_and_refuses_bad_ones(qapp, tmp_path):
    from tests.screenshot_helpers import image_pixels, run_gradexplorer

    spike_train(tmp_path / "a", 60, inject=INJECT)
    spike_train(tmp_path / "b", 60)
    shot = tmp_path / "spike.png"
    done = run_gradexplorer("open", str(tmp_path / "a"), "--spike", str(INJECT), "--dock", "spikes",
                            "--window-size", "1024x700", "--screenshot", str(shot), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert image_pixels(shot).shape == (700, 1024)
    done = run_gradexplorer("open", str(tmp_path / "b"), "--diverge", str(tmp_path / "a"),
                            "--screenshot", str(tmp_path / "d.png"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    done = run_gradexplorer("open", str(tmp_path / "a"), "--spike", "7", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"events at: {INJECT}" in done.stderr
    done = run_gradexplorer("open", str(tmp_path / "a"), "--diverge", str(tmp_path / "nope"),
                            cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
