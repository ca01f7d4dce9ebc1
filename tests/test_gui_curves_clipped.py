"""The gradient-norm curve of a run that clips: the norm as accumulated (before
``clip_grad_norm_``) with the applied one beside it, labelled; every value axis readable, a
constant series flat (never float noise stretched to fill a plot, never an axis without labels)."""

from __future__ import annotations

import math

import numpy as np
import torch
from PySide6.QtGui import QImage, QPainter
from torch import nn

import gradexplorer as gx
from gradexplorer.gui.models.timeline import StepPoint, TimelineModel
from gradexplorer.gui.plots.curves import TrainingCurves
from tests import watched_loop
from tests.gui_helpers import TIMEOUT_MS

STEPS = 8


def clipped_run(path) -> None:
    """A plain SGD loop clipping every step to max_norm=1.0, under watch."""
    watched_loop.clipped_run(path, STEPS, 1.0, torch.optim.SGD)


def tick_labels(plot) -> list[str]:
    """The tick labels the plot's left axis draws now."""
    image = QImage(10, 10, QImage.Format_ARGB32)
    painter = QPainter(image)
    try:
        specs = plot.getAxis("left").generateDrawSpecs(painter)
    finally:
        painter.end()
    return [text for _rect, _flags, text in specs[2]] if specs else []


def test_a_clipped_run_shows_the_accumulated_norm_and_the_applied_one(qtbot, make_window, tmp_path):
    clipped_run(tmp_path / "run")
    window = make_window()
    assert window.file_actions.open_run(str(tmp_path / "run")) is not None
    timeline = window.controller.timeline
    qtbot.waitUntil(lambda: timeline.latest is not None and timeline.latest.step == STEPS,
                    timeout=TIMEOUT_MS)
    window.settle()
    curves = window.curves
    curves.refresh()
    run = gx.open_run(tmp_path / "run")
    ledgers = list(run.ledger())
    accumulated = [led.grad_norm_accumulated for led in ledgers]
    applied = [run.step_info(led.optimizer_step)["global_norm"] for led in ledgers]
    assert all(led.clipped for led in ledgers) and min(accumulated) > 5
    x, y = curves.norm_item.getData()
    assert x.tolist() == list(range(1, STEPS + 1)) and y.tolist() == accumulated
    assert curves.applied_item.isVisible()
    assert curves.applied_item.getData()[1].tolist() == applied
    assert curves.norm_lines.names() == ["accumulated", "applied"]
    lo, hi = curves.norm_plot.vb.viewRange()[1]
    assert lo <= min(applied) and hi >= max(accumulated)
    labels = tick_labels(curves.norm_plot)
    assert labels and all(labels)


def constant_curves(qtbot, losses, norms) -> TrainingCurves:
    timeline = TimelineModel()
    curves = TrainingCurves(timeline)
    qtbot.addWidget(curves)
    curves.resize(700, 260)
    curves.show()
    timeline.extend([StepPoint(i + 1, loss, norm, 0.01) for i, (loss, norm) in
                     enumerate(zip(losses, norms, strict=True))], 10.0)
    curves.refresh()
    qtbot.wait(10)
    return curves


def test_a_constant_series_is_drawn_flat_with_readable_ticks(qtbot):
    steps = np.arange(200)
    losses = np.full(200, 0.6931)  # one value throughout
    norms = 1.0 + 1e-12 * np.sin(steps)  # float rounding around 1.0
    curves = constant_curves(qtbot, losses, norms)
    for plot, value in ((curves.loss_plot, 0.6931), (curves.norm_plot, 1.0)):
        lo, hi = plot.vb.viewRange()[1]
        assert math.isclose((lo + hi) / 2, value, rel_tol=1e-9)  # drawn flat, in the middle
        assert hi - lo >= 0.09 * value  # ±5% of the value, not the noise's 2e-12
        labels = tick_labels(plot)
        assert len(labels) >= 2 and all(labels) and len(set(labels)) == len(labels)


def test_float_noise_is_never_stretched_into_an_axis_without_labels(qtbot):
    steps = np.arange(200)  # the applied norm of a clipped float32 run: 1.0 ± 5e-7
    curves = constant_curves(qtbot, 2.0 + 0.1 * np.cos(steps), 1.0 + 5e-7 * np.sin(steps))
    lo, hi = curves.norm_plot.vb.viewRange()[1]
    assert lo < 1.0 - 5e-7 and hi > 1.0 + 5e-7 and hi - lo >= 1e-4
    labels = tick_labels(curves.norm_plot)
    assert len(labels) >= 2 and all(labels) and len(set(labels)) == len(labels)


def test_a_run_that_neither_clips_nor_scales_shows_one_norm_curve(qtbot, make_window, tmp_path):
    from tests.watched_loop import make, train

    model, opt = make()
    with gx.watch(model, opt, tmp_path / "run", bins=8):
        train(model, opt, 4)
    window = make_window()
    assert window.file_actions.open_run(str(tmp_path / "run")) is not None
    timeline = window.controller.timeline
    qtbot.waitUntil(lambda: timeline.latest is not None and timeline.latest.step == 4,
                    timeout=TIMEOUT_MS)
    window.settle()
    window.curves.refresh()
    run = gx.open_run(tmp_path / "run")
    applied = [run.step_info(s)["global_norm"] for s in range(1, 5)]
    assert window.curves.norm_item.getData()[1].tolist() == applied  # the same gradient
    assert not timeline.clips_or_scales and not window.curves.applied_item.isVisible()
    assert window.curves.norm_lines.names() == []


def test_an_overlaid_clipped_run_draws_its_accumulated_norm(tmp_path):
    from gradexplorer.core.runs.history import RunHistory
    from gradexplorer.gui.models.run_overlay import HistorySource

    clipped_run(tmp_path / "run")
    run = gx.open_run(tmp_path / "run")
    source = HistorySource(RunHistory(run))
    steps, headline = source.figure("headline_norm")
    ledgers = list(run.ledger())
    assert steps.tolist() == [led.optimizer_step for led in ledgers]
    assert headline.tolist() == [led.grad_norm_accumulated for led in ledgers]
    assert source.figure("global_norm")[1].tolist() == [led.grad_norm_applied for led in ledgers]
    source.close()


def test_a_scaled_run_s_norm_is_divided_by_its_scale(qtbot, tmp_path, monkeypatch):
    import pandas as pd
    from PySide6.QtWidgets import QFileDialog

    from gradexplorer.core.runs.history import RunHistory
    from gradexplorer.gui.models.run_overlay import HistorySource

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    with gx.watch(model, opt, tmp_path / "run", bins=8, scaler=scaler):
        for step in range(4):
            x = torch.randn(16, 6, generator=torch.Generator().manual_seed(step))
            opt.zero_grad()
            scaler.scale(model(x).square().mean()).backward()
            scaler.step(opt)
            scaler.update()
    run = gx.open_run(tmp_path / "run")
    ledgers = list(run.ledger())
    assert all(led.scale == 1024.0 for led in ledgers)
    expected = [led.grad_norm_accumulated / led.scale for led in ledgers]
    source = HistorySource(RunHistory(run))
    assert source.figure("headline_norm")[1].tolist() == expected
    source.close()
    timeline = TimelineModel()
    timeline.extend([StepPoint(led.optimizer_step, 0.0, led.grad_norm_applied, 0.0, ledger=led)
                     for led in ledgers], 1.0)
    assert timeline.norm.y.tolist() == expected and timeline.clips_or_scales
    assert timeline.applied.y.tolist() == [led.grad_norm_applied for led in ledgers]
    curves = TrainingCurves(timeline)  # its CSV: the scale beside the norm as accumulated
    qtbot.addWidget(curves)
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(tmp_path / "c.csv"), ""))
    curves.save_csv()
    table = pd.read_csv(tmp_path / "c.csv")
    assert list(table.columns) == ["step", "loss", "global_norm", "grad_norm_accumulated", "scale"]
    assert table["grad_norm_accumulated"].tolist() == [led.grad_norm_accumulated for led in ledgers]
    assert table["scale"].tolist() == [1024.0] * len(ledgers)


def test_the_curves_csv_of_a_clipped_run_holds_both_norms(qtbot, make_window, tmp_path, monkeypatch):
    """CSV… beside the curves: the norm as applied (``global_norm``) and as accumulated
    (``grad_norm_accumulated``, the Ledger's and the exports' name), each as the run stores
    it; overlaid with a run that does not clip, that run's accumulated norm is its applied one."""
    import pandas as pd
    from PySide6.QtWidgets import QFileDialog

    from tests.watched_loop import make, train

    clipped_run(tmp_path / "clipped")
    model, opt = make()
    with gx.watch(model, opt, tmp_path / "plain", bins=8):
        train(model, opt, 3)
    window = make_window()
    assert window.file_actions.open_run(str(tmp_path / "clipped")) is not None
    timeline = window.controller.timeline
    qtbot.waitUntil(lambda: timeline.latest is not None and timeline.latest.step == STEPS,
                    timeout=TIMEOUT_MS)
    target = tmp_path / "curves.csv"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(target), ""))
    window.curves.csv_button.click()
    table = pd.read_csv(target)
    assert list(table.columns) == ["step", "loss", "global_norm", "grad_norm_accumulated"]
    run = gx.open_run(tmp_path / "clipped")
    ledgers = list(run.ledger())
    assert table["step"].tolist() == [led.optimizer_step for led in ledgers]
    assert table["global_norm"].tolist() == [run.step_info(s)["global_norm"] for s in run.steps]
    assert table["grad_norm_accumulated"].tolist() == [led.grad_norm_accumulated for led in ledgers]
    assert (table["grad_norm_accumulated"] > 5 * table["global_norm"]).all()  # clipped to 1.0
    assert window.run_compare.add_run(tmp_path / "plain") is not None
    window.curves.csv_button.click()
    table = pd.read_csv(target)
    assert list(table.columns) == ["run", "step", "loss", "global_norm", "grad_norm_accumulated"]
    plain = table[table["run"] == "plain"]
    stored = gx.open_run(tmp_path / "plain")
    assert plain["grad_norm_accumulated"].tolist() == [led.grad_norm_accumulated for led in stored.ledger()]
    assert plain["grad_norm_accumulated"].tolist() == plain["global_norm"].tolist()
    assert table[table["run"] == "clipped"]["grad_norm_accumulated"].tolist() == \
        [led.grad_norm_accumulated for led in ledgers]
