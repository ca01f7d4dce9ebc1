"""A parameter whose gradient is all NaN (or holds an Inf) is never shown, sorted or saved as a
number: the Distributions tiles say ``‖g‖ NaN``, it ranks above every healthy one under the
"largest" orders, and the grid's CSV writes ``nan``/``inf``."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch
from PySide6.QtWidgets import QFileDialog
from torch import nn

import gradexplorer as gx
from gradexplorer.core.stats.ranking import rank_parameters
from gradexplorer.gui.models.selection import SelectionModel
from gradexplorer.gui.models.timeline import TimelineModel
from gradexplorer.gui.plots.distributions_dock import DistributionsPanel
from gradexplorer.gui.plots.histogram_grid import NORM_ROLE


def nan_history():
    """A real MLP under watch; at the last step 1.weight's gradient is all NaN and 2.bias's
    holds one +Inf (set by hand after backward, before the step, where watch reads them)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 6), nn.Linear(6, 6), nn.Linear(6, 6))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    rec = gx.watch(model, opt, bins=16)
    for step in range(3):
        opt.zero_grad()
        x = torch.randn(4, 6, generator=torch.Generator().manual_seed(step))
        model(x).square().mean().backward()
        if step == 2:
            model[1].weight.grad.fill_(math.nan)
            model[2].bias.grad[0] = math.inf
        opt.step()
    rec.close()
    history = rec.monitor.history
    params = history.latest().params
    assert params["1.weight"].nan_count == 36 and params["1.weight"].norm == 0.0  # finite part: none
    assert params["2.bias"].inf_count == 1 and math.isfinite(params["2.bias"].norm)
    return history


@pytest.fixture
def panel(qtbot):
    timeline = TimelineModel()
    timeline.reset(nan_history())
    panel = DistributionsPanel(SelectionModel(), timeline)
    qtbot.addWidget(panel)
    panel.resize(700, 800)
    panel.show()
    panel.refresh()
    return panel


def test_tiles_say_nan_and_inf_never_the_finite_parts_norm(panel):
    grid = panel.grid
    row = {n: grid.model.index(i) for i, n in enumerate(grid.model.names)}
    assert row["1.weight"].data(NORM_ROLE) == "‖g‖ NaN"
    assert row["2.bias"].data(NORM_ROLE) == "‖g‖ inf"
    healthy = panel.timeline.latest_gradients.params["0.weight"]
    assert row["0.weight"].data(NORM_ROLE) == f"‖g‖ {healthy.norm:.4g}"
    tip = row["1.weight"].data(0x03)  # Qt.ToolTipRole
    assert "norm NaN · max |g| NaN" in tip and "NaN 36" in tip
    panel.grid.view.viewport().grab()  # the tiles paint with the role's text


@pytest.mark.parametrize("ranking", ["largest norm", "largest max |g|"])
def test_a_nan_gradient_ranks_above_every_healthy_one(panel, ranking):
    grid = panel.grid
    grid.ranking.setCurrentText(ranking)
    params = panel.timeline.latest_gradients.params
    assert grid.model.names[:2] == ["1.weight", "2.bias"]  # NaN/Inf first, in model order
    rest = [getattr(params[n], RANKING_FIELD[ranking]) for n in grid.model.names[2:]]
    assert rest == sorted(rest, reverse=True) and all(math.isfinite(v) for v in rest)
    assert rank_parameters(params, ranking) == grid.model.names


RANKING_FIELD = {"largest norm": "norm", "largest max |g|": "abs_max"}


def test_grid_csv_writes_nan_and_inf(panel, tmp_path, monkeypatch):
    target = tmp_path / "grid.csv"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(target), ""))
    panel.grid.ranking.setCurrentText("largest norm")
    assert panel.grid.save_csv() == str(target)
    df = pd.read_csv(target).set_index("parameter")
    assert list(df.index) == panel.grid.model.names
    assert math.isnan(df.loc["1.weight", "norm"]) and math.isnan(df.loc["1.weight", "abs_max"])
    assert df.loc["2.bias", "norm"] == math.inf and df.loc["2.bias", "abs_max"] == math.inf
    assert df.loc["1.weight", "nan_count"] == 36 and df.loc["2.bias", "inf_count"] == 1
    params = panel.timeline.latest_gradients.params
    assert df.loc["0.weight", "norm"] == params["0.weight"].norm  # healthy: exact
    assert "nan" in target.read_text().splitlines()[1].split(",")  # written as ``nan``


def test_the_details_pane_says_an_all_nan_gradient_has_no_finite_element(qtbot):
    """The details pane wrote "NaN (finite elements: NaN)" for max |g| of an all-NaN gradient:
    there is no finite element to give a figure of."""
    from gradexplorer.gui.panels.details_pane import stats_rows

    params = nan_history().latest().params
    text = "".join(stats_rows(params["1.weight"]))
    assert "NaN</b> (no finite element)" in text and "finite elements:" not in text
    text = "".join(stats_rows(params["2.bias"]))  # one Inf: its finite part's figures
    assert f"inf</b> (finite elements: {params['2.bias'].norm:.4g})" in text


def test_open_dock_distributions_shows_a_run_s_nan_tiles(make_window, tmp_path):
    """``gradexplorer open RUN --dock distributions``: the tiles in front, the last step's NaN
    and Inf gradients read as such (a run directory written by watch)."""
    from gradexplorer.cli import build_parser
    from gradexplorer.gui.window.step_forensics import run_opener
    from tests.share_helpers import write_run

    path = write_run(tmp_path / "run", steps=3, nan_at=3)
    args = build_parser().parse_args(["open", str(path), "--dock", "distributions"])
    window = make_window()
    run_opener(dock=args.dock)(window, path)
    window.settle()
    assert not window.distributions_dock.visibleRegion().isEmpty()
    assert window.gradients_dock.visibleRegion().isEmpty()  # its tab is behind
    grid = window.distributions.grid
    texts = {n: grid.model.index(i).data(NORM_ROLE) for i, n in enumerate(grid.model.names)}
    assert texts["0.weight"] == "‖g‖ NaN" and texts["2.bias"] == "‖g‖ inf"
