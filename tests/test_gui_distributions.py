"""The Distributions dock: every parameter's histogram in a filtered, ranked, virtualised grid
(click selects everywhere) and the selected parameter's distribution bands."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt

import gradexplorer as gx
from gradexplorer.core.stats.bands import distribution_bands
from gradexplorer.core.stats.ranking import rank_parameters
from gradexplorer.gui.models.selection import SelectionModel
from gradexplorer.gui.models.timeline import TimelineModel
from gradexplorer.gui.plots import histogram_grid
from gradexplorer.gui.plots.distributions_dock import DistributionsPanel
from tests.share_helpers import recorded_history


@pytest.fixture
def panel(qtbot):
    selection, timeline = SelectionModel(), TimelineModel()
    timeline.reset(recorded_history())
    panel = DistributionsPanel(selection, timeline)
    qtbot.addWidget(panel)
    panel.resize(700, 800)
    panel.show()
    panel.flush()
    panel.refresh()
    return panel


def test_grid_shows_every_parameter_ranked_and_filtered(panel):
    grid = panel.grid
    params = panel.timeline.latest_gradients.params
    assert grid.model.names == list(params)  # model order first
    grid.ranking.setCurrentText("largest norm")
    assert grid.model.names[0] == "3.weight"  # its NaN gradient: the largest, never its finite norm
    norms = [params[n].norm for n in grid.model.names[1:]]
    assert norms == sorted(norms, reverse=True)
    grid.ranking.setCurrentText("NaN/Inf first")
    assert grid.model.names[0] == "3.weight" and params["3.weight"].nan_count == 1
    grid.filter.setText("BIAS")
    assert grid.model.names and all(n.endswith(".bias") for n in grid.model.names)
    assert grid.count.text() == f"{len(grid.model.names)} of {len(params)}"


def test_a_click_on_a_tile_selects_the_parameter_everywhere(panel, qtbot):
    grid = panel.grid
    index = grid.model.index(grid.model.names.index("2.weight"))
    rect = grid.view.visualRect(index)
    qtbot.mouseClick(grid.view.viewport(), Qt.LeftButton, pos=rect.center())
    assert panel.selection.current.param == "2.weight"
    # the bands now describe 2.weight: equal to the core's bands of its histograms
    matrix = panel.timeline.gradients.histogram_matrix("2.weight")
    want = distribution_bands(matrix.edges, matrix.counts)
    x, y = panel.bands.median.getData()
    assert x.tolist() == matrix.steps.tolist() and y.tolist() == want["median"].tolist()
    assert panel.bands.edges["p95"].getData()[1].tolist() == want["p95"].tolist()
    # a selection made elsewhere is shown in the grid
    panel.selection.select(param="5.bias", module="5", source="table")
    assert grid.model.names[grid.view.currentIndex().row()] == "5.bias"


def test_bands_say_so_when_nothing_is_selected(panel):
    panel.selection.clear()
    panel.refresh_bands()
    assert panel.bands.note.toPlainText() == "select a parameter"


def test_grid_paints_only_the_tiles_in_view(qtbot):
    """1,000 parameters: the view lays them all out but paints only what is visible."""
    selection, timeline = SelectionModel(), TimelineModel()
    timeline.reset(recorded_history(layers=500, steps=1, nan_layer=None))
    panel = DistributionsPanel(selection, timeline)
    qtbot.addWidget(panel)
    panel.resize(700, 800)
    panel.show()
    panel.refresh()
    assert panel.grid.model.rowCount() == 1000
    painted = []

    class Counting(histogram_grid.TileDelegate):
        def paint(self, painter, option, index):
            painted.append(index.row())
            super().paint(painter, option, index)

    delegate = Counting(panel.grid.model)
    panel.grid.view.setItemDelegate(delegate)
    qtbot.waitExposed(panel)
    panel.grid.view.viewport().grab()
    assert 0 < len(painted) < 100
    panel.grid.view.scrollToBottom()
    painted.clear()
    panel.grid.view.viewport().grab()
    assert painted and max(painted) == 999 and min(painted) > 900


def test_rankings_in_core():
    s = recorded_history(layers=3, steps=2, nan_layer=1).latest().params
    assert rank_parameters(s, "NaN/Inf first")[0] == "1.weight"
    by_update = rank_parameters(s, "largest update ratio")
    ratios = [s[n].update_ratio for n in by_update]
    assert ratios == sorted(ratios, reverse=True)
    with pytest.raises(ValueError):
        rank_parameters(s, "alphabetical")
    assert np.all([("0." in n) for n in rank_parameters(s, text="0.")])


def test_bands_of_a_run_directory_cover_the_whole_run(qtbot, tmp_path):
    from gradexplorer.core.runs.history import RunHistory
    from gradexplorer.core.stats.history import GradientHistory
    from tests.share_helpers import write_run

    run = gx.open_run(write_run(tmp_path / "run", steps=30, bins=16))
    history = GradientHistory(8)  # what a follower's window would hold: the last 8 steps
    for step in run.steps:
        history.append(run.step_gradients(step))
    selection, timeline = SelectionModel(), TimelineModel()
    timeline.reset(history)
    panel = DistributionsPanel(selection, timeline)
    qtbot.addWidget(panel)
    selection.select(param="0.weight", module="0")
    assert panel.bands.median.getData()[0].tolist() == list(range(23, 31))  # the history only
    panel.set_run(run)
    x, y = panel.bands.median.getData()
    assert x.tolist() == run.steps  # the whole run
    matrix = RunHistory(run).histogram_matrix("0.weight", run.steps)
    assert y.tolist() == distribution_bands(matrix.edges, matrix.counts)["median"].tolist()
    panel.set_run(None)
    assert panel.bands.median.getData()[0].tolist() == list(range(23, 31))
