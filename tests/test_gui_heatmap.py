"""The histogram-over-steps heat map: a note when empty, the image in view once data comes."""

import numpy as np

from gradexplorer.core.stats.history import HistogramMatrix
from gradexplorer.gui.plots.heatmap_plot import HistogramHeatmap


def test_heatmap_note_then_image_in_view(qtbot):
    plot = HistogramHeatmap()
    qtbot.addWidget(plot)
    plot.show_matrix("conv1.weight", None)
    assert plot.note.toPlainText() == "no gradient recorded yet" and not plot.has_data
    steps = np.arange(10, 40)
    edges = np.linspace(-0.3, 0.3, 9)[None, :].repeat(len(steps), axis=0)
    counts = np.ones((len(steps), 8))
    plot.show_matrix("conv1.weight", HistogramMatrix(steps, edges, counts))
    assert plot.has_data and plot.note.toPlainText() == ""
    plot.show()
    qtbot.waitUntil(lambda: plot.plotItem.vb.viewRange()[0][1] > 1.0, timeout=30_000)
    (x0, x1), (y0, y1) = plot.plotItem.vb.viewRange()
    assert x0 <= 10 and x1 >= 39 and y0 <= -0.3 and y1 >= 0.3  # the image, not the note's 0..1


def test_a_step_partly_not_binned_says_how_many_values_are_apart(qtbot):
    plot = HistogramHeatmap()
    qtbot.addWidget(plot)
    edges = np.linspace(-1.0, 1.0, 5)[None, :].repeat(3, axis=0)
    counts = np.array([[1, 2, 3, 4], [1, 0, 0, 1], [0, 0, 0, 0]])
    plot.show_matrix("w", HistogramMatrix(np.array([1, 2, 3]), edges, counts, np.array([0, 5, 7])))
    assert plot.describe_cell(1, 0.1) == "step 1 · [0, 0.5): 3 values"
    assert plot.describe_cell(2, 0.9) == "step 2 · [0.5, 1): 1 values · +5 NaN/Inf not binned"
    assert plot.describe_cell(3, 0.1) == "step 3: not binned (NaN/Inf) · 7 values"
    assert plot.unbinned.opts["x0"].tolist() == [2.5] and plot.unbinned.isVisibleTo(plot.plotItem)
    plot.show_matrix("w", HistogramMatrix(np.array([1, 2]), edges[:2], counts[:2], np.array([0, 5])))
    assert not plot.unbinned.isVisibleTo(plot.plotItem) and not plot.unbinned_key.isVisibleTo(plot.plotItem)
