"""The Optimizer tab: the selected parameter's optimizer state over the steps (issue 19, item 3).

Every plotted value is checked against an independent float64 computation from the optimizer's
own ``optimizer.state`` (``reference_state``) and from θ before and after each step, in the
live session (Adam; SGD with momentum) and in a run directory written by ``watch``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.core.model.spec import ModelOptions
from gradexplorer.core.session.engine import SessionConfig
from gradexplorer.gui.models.optimizer_track import SERIES_FIELDS
from gradexplorer.gui.plots.optimizer_curves import FIGURES
from tests.gui_helpers import TIMEOUT_MS, wait_idle
from tests.stats_reference import reference_state

STEPS = 4


class ReferenceObserver:
    """A session observer: after every step, each parameter's figures in float64 (numpy)."""

    def __init__(self) -> None:
        self.before: dict[str, np.ndarray] = {}
        self.steps: list[dict[str, dict[str, float]]] = []

    def after_backward(self, session, _step) -> None:
        self.before = {n: p.detach().double().numpy().copy() for n, p in session.model.named_parameters()}

    def after_step(self, session, _result) -> None:
        self.steps.append(reference_figures(session.model, session.optimizer, self.before))


def reference_figures(model, opt, before) -> dict[str, dict[str, float]]:
    group_of = {id(p): g for g in opt.param_groups for p in g["params"]}
    out = {}
    for name, p in model.named_parameters():
        figures = {k: float(v) for k, v in reference_state(opt, p, group_of[id(p)]).items()}
        theta = before[name]
        delta = np.sqrt(np.sum((p.detach().double().numpy() - theta) ** 2))
        size = np.sqrt(np.sum(theta * theta))
        figures["update_ratio"] = delta / size if size > 0 else math.inf
        out[name] = figures
    return out


def plotted(window, field: str) -> tuple[list[float], np.ndarray]:
    """The Optimizer tab's curve of ``field`` as drawn (θ-was-0 steps as +inf from the marks)."""
    curves = window.forensics.optimizer_curves
    curves.choose(field)
    x, y = curves.curve.getData()
    y = np.array(y, dtype=float)
    marks, _ = curves.new_marks.getData()
    for step in [] if marks is None else marks:
        y[list(x).index(step)] = math.inf
    return list(x), y


def assert_curves_equal(window, name: str, expected: list[dict[str, dict[str, float]]],
                        steps: list[int]) -> None:
    window.forensics.optimizer_dock.raise_()  # a hidden tab reads nothing
    window.selection.select(param=name, module=name.rpartition(".")[0], source="test")
    assert window.forensics.optimizer_curves.param == name
    for field in SERIES_FIELDS:
        x, y = plotted(window, field)
        want = [e[name].get(field) for e in expected]
        if all(w is None for w in want):  # the optimizer keeps no such state: nothing drawn
            assert not np.isfinite(y).any(), field
            assert "keeps no" in window.forensics.optimizer_curves.readout.text()
            continue
        assert x == steps, field
        assert y == pytest.approx(np.array(want, dtype=float), rel=1e-12, abs=0), (name, field)
        axis = window.forensics.optimizer_curves.plot.getPlotItem().getAxis("left")
        assert axis.labelText == FIGURES[field][1]
        assert "inf" not in window.forensics.optimizer_curves.readout.text()


def live_window(qtbot, make_window, config: SessionConfig):
    window = make_window()
    window.controller.open_model("example:digits", ModelOptions(batch_size=16), config)
    qtbot.waitUntil(lambda: window.controller.session.live is not None
                    and window.graph_panel.drawing is not None, timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    observer = ReferenceObserver()
    window.controller.session.live.session.add_observer(observer)  # idle: the worker is not stepping
    window.controller.run(STEPS)
    qtbot.waitUntil(lambda: window.controller.timeline.latest is not None
                    and window.controller.timeline.latest.step == STEPS, timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    return window, observer


@pytest.mark.parametrize("optimizer", ["adam", "sgd-momentum"])
def test_live_optimizer_curves_equal_the_optimizers_own_state(qtbot, make_window, optimizer):
    config = SessionConfig(device="cpu", optimizer="adam", lr=0.002) if optimizer == "adam" else \
        SessionConfig(device="cpu", optimizer="sgd", lr=0.05, momentum=0.9)
    window, observer = live_window(qtbot, make_window, config)
    assert len(observer.steps) == STEPS
    names = [n for n, _ in window.controller.session.live.session.model.named_parameters()]
    window.forensics.optimizer_dock.raise_()
    for name in (names[0], names[-1]):
        assert_curves_equal(window, name, observer.steps, list(range(1, STEPS + 1)))
    # the figure the tab opens on is the optimizer's own: ‖m‖ for Adam, ‖momentum‖ for SGD
    fresh = window.forensics.optimizer_curves
    fresh.chosen = None
    fresh.refresh()
    assert fresh.field == ("exp_avg_norm" if optimizer == "adam" else "momentum_norm")
    assert fresh.plot.getPlotItem().getAxis("left").labelText == \
        ("‖m‖" if optimizer == "adam" else "‖momentum‖")


def clipped_run(path, optimizer: str) -> list[dict[str, dict[str, float]]]:
    """A plain loop under watch (a zero-initialised bias: its first update ratio is 'new');
    the float64 reference figures after each step."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 2))
    nn.init.zeros_(model[2].bias)
    opt = torch.optim.Adam(model.parameters(), lr=0.01) if optimizer == "adam" else \
        torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    expected = []
    with gx.watch(model, opt, path, bins=8):
        for step in range(STEPS):
            x = torch.randn(16, 6, generator=torch.Generator().manual_seed(step))
            opt.zero_grad()
            (model(x).square().mean() * 100).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
            before = {n: p.detach().double().numpy().copy() for n, p in model.named_parameters()}
            opt.step()
            expected.append(reference_figures(model, opt, before))
    return expected


@pytest.mark.parametrize("optimizer", ["adam", "sgd-momentum"])
def test_a_run_directorys_optimizer_curves_equal_the_optimizers_own_state(
        qtbot, make_window, tmp_path, optimizer):
    expected = clipped_run(tmp_path / "run", optimizer)
    assert expected[0]["2.bias"]["update_ratio"] == math.inf
    window = make_window()
    assert window.file_actions.open_run(str(tmp_path / "run")) is not None
    window.settle()
    for name in ("0.weight", "2.bias"):
        assert_curves_equal(window, name, expected, list(range(1, STEPS + 1)))
    # θ was 0 before step 1: a "new" mark at step 1, no point at inf, and the words say so
    window.forensics.optimizer_curves.choose("update_ratio")
    marks, _ = window.forensics.optimizer_curves.new_marks.getData()
    assert list(marks) == [1]
    x, y = window.forensics.optimizer_curves.curve.getData()
    assert math.isnan(y[0]) and np.isfinite(y[1:]).all()
    assert "▲ new (θ was 0) at step 1" in window.forensics.optimizer_curves.readout.text()
    curves = window.forensics.optimizer_curves
    assert curves.describe_point(None, 1.0, 0.0) == "step 1 · ‖Δθ‖/‖θ‖ new (θ was 0)"
    # a module selected: its first parameter
    window.selection.select(module="0", source="test")
    assert window.forensics.optimizer_curves.param == "0.weight"
    # hidden behind another tab it reads nothing; shown again, it draws what changed meanwhile
    window.curves_dock.raise_()
    qtbot.waitUntil(lambda: not window.forensics.optimizer_curves.shown, timeout=TIMEOUT_MS)
    window.selection.select(param="2.weight", module="2", source="test")
    assert window.forensics.optimizer_curves.param == "0.weight" and window.forensics.optimizer_curves.stale
    window.forensics.optimizer_dock.raise_()
    qtbot.waitUntil(lambda: window.forensics.optimizer_curves.param == "2.weight", timeout=TIMEOUT_MS)
    assert not window.forensics.optimizer_curves.stale


def test_a_followed_run_grows_its_optimizer_curves(qtbot, make_window, tmp_path):
    """Steps written after the run was opened reach the curves (the follower's poll → the
    timeline → the tab), read from the run once each."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    window = make_window()
    expected = []
    with gx.watch(model, opt, tmp_path / "run", bins=8):
        for step in range(STEPS):
            opt.zero_grad()
            model(torch.ones(2, 4) * (step + 1)).sum().backward()
            before = {n: p.detach().double().numpy().copy() for n, p in model.named_parameters()}
            opt.step()
            expected.append(reference_figures(model, opt, before))
            if step == 1:
                assert window.file_actions.open_run(str(tmp_path / "run")) is not None
                window.settle()
                window.forensics.optimizer_dock.raise_()
                assert plotted(window, "exp_avg_norm")[0] == [1, 2]
    # the follower's poll → the timeline → the tab's throttled redraw, nothing called by hand
    qtbot.waitUntil(lambda: len(window.forensics.optimizer_curves.curve.getData()[0]) == STEPS,
                    timeout=TIMEOUT_MS)
    x, y = window.forensics.optimizer_curves.curve.getData()
    assert list(y) == pytest.approx([e["0.weight"]["exp_avg_norm"] for e in expected], rel=1e-12)
    assert_curves_equal(window, "0.weight", expected, list(range(1, STEPS + 1)))


def test_the_live_track_keeps_the_newest_steps_within_its_budget(monkeypatch):
    """Memory is bounded (CELLS figures); when full the oldest half goes, never the newest."""
    from gradexplorer.core.stats.optimizer_state import ParamOptimState
    from gradexplorer.gui.models import optimizer_track
    from gradexplorer.gui.models.timeline import StepPoint

    monkeypatch.setattr(optimizer_track, "CELLS", 2 * 6 * 10)  # two parameters: 10 steps
    track = optimizer_track.OptimizerTrack()
    for step in range(1, 26):
        state = {n: ParamOptimState(n, lr=step * k, momentum_norm=None) for k, n in ((1, "a"), (2, "b"))}
        track.take([StepPoint(step, 0.0, None, 0.0, optimizer=state,
                              update_ratios={"a": math.inf if step == 1 else 1 / step})])
    steps, figures = track.series("b")
    assert len(steps) <= 10 and steps[-1] == 25 and list(steps) == list(range(int(steps[0]), 26))
    assert list(figures["lr"]) == [2 * s for s in steps]
    assert np.isnan(figures["momentum_norm"]).all() and np.isnan(figures["update_ratio"]).all()
    assert list(track.series("a")[1]["update_ratio"]) == [1 / s for s in steps]
    assert track.names == ["a", "b"]
    assert len(track.series("nothing")[0]) == 0


def test_a_damaged_figure_is_one_line_in_the_tab(qtbot, make_window, tmp_path):
    import sqlite3

    clipped_run(tmp_path / "run", "adam")
    with sqlite3.connect(tmp_path / "run" / "run.sqlite") as db:
        db.execute("UPDATE param_step_rows SET exp_avg_norm = 'garbage' WHERE step = 2")
    from gradexplorer.core.messages.errors import UserError

    with gx.open_run(tmp_path / "run") as run, pytest.raises(UserError, match="garbage"):
        gx.runs.RunHistory(run).optimizer_series("0.weight")
    window = make_window()
    assert window.file_actions.open_run(str(tmp_path / "run")) is not None
    window.settle()
    window.forensics.optimizer_dock.raise_()
    window.selection.select(param="0.weight", module="0", source="test")
    text = window.forensics.optimizer_curves.readout.text()
    assert "garbage" in text and "\n" not in text
    x, _ = window.forensics.optimizer_curves.curve.getData()
    assert x is None or len(x) == 0
