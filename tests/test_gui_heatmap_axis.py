"""The heat map's value axis follows the distribution (per step, log |g|) so a gradient that
shrinks 100× stays visible, and a run directory's heat map covers the whole run."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.core.runs.history import RunHistory
from gradexplorer.core.stats.history import GradientHistory
from gradexplorer.gui.models.selection import SelectionModel
from gradexplorer.gui.models.timeline import TimelineModel
from gradexplorer.gui.plots.gradient_panel import GradientPanel
from gradexplorer.gui.plots.heatmap_axes import heatmap_rows

BINS = 32


def shrinking_run(path, steps: int = 12, shrink_after: int = 3):
    """A real MLP under watch whose loss (so every gradient) is scaled down 100× after step 3."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gx.watch(model, opt, path, bins=BINS) as rec:
        for step in range(1, steps + 1):
            x = torch.randn(32, 8, generator=torch.Generator().manual_seed(step))
            scale = 1.0 if step <= shrink_after else 0.01
            opt.zero_grad()
            loss = scale * model(x).square().mean()
            loss.backward()
            rec.note_loss(loss)
            opt.step()
    return gx.open_run(path)


@pytest.fixture
def panel(qtbot, tmp_path):
    run = shrinking_run(tmp_path / "run")
    selection, timeline = SelectionModel(), TimelineModel()
    timeline.reset(GradientHistory(4))  # a short window: the run directory's heat map is wider
    panel = GradientPanel(selection, timeline)
    qtbot.addWidget(panel)
    panel.resize(500, 900)
    panel.show()
    panel.param = "0.weight"
    panel.set_run(run)
    yield panel
    run.close()


def lit_rows(panel, column: int) -> int:
    """Rows of one step's column of the drawn image above 1% of its brightest cell."""
    image = panel.heatmap.image.image  # value rows × step columns, as drawn
    col = image[:, column]
    return int((col > 0.01 * col.max()).sum())


def test_the_heat_map_of_a_run_directory_covers_the_whole_run(panel):
    run = panel.run_history.run
    assert panel.heatmap.shown[1].tolist() == run.steps == list(range(1, 13))
    assert panel.heatmap.image.image.shape == (BINS, 12)


def test_a_100x_shrinking_distribution_stays_visible_when_the_axis_follows_it(panel):
    early, late = 1, 11  # columns: step 2 and step 12
    assert panel.axis_box.currentText() == "fixed"
    fixed_late = lit_rows(panel, late)
    assert lit_rows(panel, early) >= 10 and fixed_late <= 2  # a thin line at zero

    panel.axis_box.setCurrentText("per step")
    assert panel.heatmap.axis_mode == "per step"
    assert lit_rows(panel, late) >= 10 and lit_rows(panel, early) >= 10  # a band at every step
    assert panel.heatmap.plotItem.getAxis("left").labelText == "value ÷ max |g| of its step"
    # each column keeps its step's total count
    matrix = panel.run_history.histogram_matrix("0.weight", panel.run_history.run.steps)
    image = panel.heatmap.shown[2]
    assert np.allclose(image.sum(axis=1), matrix.counts.sum(axis=1))

    panel.axis_box.setCurrentText("log |g|")
    rows = panel.heatmap.shown[0].rows
    image = panel.heatmap.image.image
    centre = [float(np.average((rows[:-1] + rows[1:]) / 2, weights=image[:, c])) for c in (early, late)]
    assert lit_rows(panel, late) >= 5
    assert 1.5 < centre[0] - centre[1] < 2.5  # two decades lower, still drawn
    # the readout speaks of |g|, not of log10 |g|
    text = panel.heatmap.describe_cell(12, float(centre[1]))
    assert text.startswith("step 12 · |g| in [")


def test_per_step_axis_equals_an_independent_rescaling():
    edges = np.array([[-2.0, 0.0, 2.0], [-0.02, 0.0, 0.02]])
    counts = np.array([[3.0, 1.0], [1.0, 3.0]])
    rows = heatmap_rows(edges, counts, "per step", bins=2)
    assert rows.rows.tolist() == [-1.0, 0.0, 1.0]
    assert rows.counts.tolist() == counts.tolist()  # each step on its own range: unchanged
    fixed = heatmap_rows(edges, counts, "fixed", bins=4)
    assert fixed.counts[1].tolist() == [0.0, 1.0, 3.0, 0.0]  # the small step in the middle rows
    log = heatmap_rows(edges, counts, "log |g|", bins=4)
    floor = 10.0 ** log.rows[0]
    assert np.isclose(floor, 0.02 / 16)  # a sixteenth of the finest bin
    kept = counts.sum(axis=1) - counts[:, 0] * floor / 0.02 * np.array([0.01, 1]) \
        - counts[:, 1] * floor / 0.02 * np.array([0.01, 1])  # the mass under the floor, per step
    assert np.allclose(log.counts.sum(axis=1), kept)
    positive = heatmap_rows(np.array([[1.0, 2.0, 4.0]]), np.array([[5.0, 7.0]]), "log |g|", bins=8)
    assert np.isclose(positive.counts.sum(), 12.0)  # nothing near zero: every count kept
    with pytest.raises(ValueError):
        heatmap_rows(edges, counts, "sideways")


def test_the_window_s_heat_map_covers_a_followed_run(qtbot, make_window, tmp_path):
    shrinking_run(tmp_path / "run", steps=6).close()
    window = make_window()
    window.file_actions.open_run(str(tmp_path / "run"))
    window.selection.select(param="2.weight", module="2", source="test")
    window.settle()
    assert isinstance(window.gradients.run_history, RunHistory)
    assert window.gradients.heatmap.shown[1].tolist() == [1, 2, 3, 4, 5, 6]
