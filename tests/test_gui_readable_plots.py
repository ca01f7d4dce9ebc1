"""Readable plots (issue 22, item 8): whole-step ticks, tick labels that never overlap in a
short plot, heat-map readouts in whole recorded counts, a histogram that shows its shape when
most values are exactly 0, compare windows on one scale with a legend, plot images saved at a
chosen width and DPI."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
import torch
from grad_helpers import make_session
from PySide6.QtGui import QImage, QPainter
from torch import nn

from gradexplorer.core.model.workload import Workload
from gradexplorer.core.session.engine import SessionConfig, TrainingSession
from gradexplorer.core.snapshot import write_snapshot
from gradexplorer.core.stats.history import GradientHistory
from gradexplorer.core.stats.monitor import GradientMonitor
from gradexplorer.gui.plots.heatmap_plot import HistogramHeatmap
from gradexplorer.gui.plots.histogram_plot import HistogramPlot
from gradexplorer.gui.theme import steady_axes
from tests.gui_helpers import open_model, wait_idle


def drawn_labels(axis) -> list:
    """``[(rect, text)]`` of the tick labels ``axis`` draws now."""
    image = QImage(8, 8, QImage.Format_ARGB32)
    painter = QPainter(image)
    try:
        _, _, texts = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    return [(rect, text) for rect, _, text in texts]


def overlapping(labels) -> list:
    return [(a, b) for i, (ra, a) in enumerate(labels) for rb, b in labels[i + 1:]
            if ra.intersects(rb)]


def lenet_steps(steps: int):
    session = make_session("example:lenet")
    session.add_observer(GradientMonitor(bins=32))
    history = GradientHistory(16)
    for _ in range(steps):
        history.append(session.step().gradients)
    return session, history


def test_step_ticks_are_whole_and_short_plots_never_overlap_labels(qtbot):
    session, history = lenet_steps(3)
    steps, norms = history.series("conv1.weight", "norm")
    plot = pg.PlotWidget(title="global ‖g‖")  # titled, as the app's plots are
    qtbot.addWidget(plot)
    steady_axes(plot.plotItem, steps=True)
    plot.plot(steps.astype(float), norms)
    plot.resize(340, 80)  # a plot at 1024×700: about 80 px tall
    plot.show()
    qtbot.waitExposed(plot)
    plot.grab()
    bottom = [text for _, text in drawn_labels(plot.plotItem.getAxis("bottom"))]
    assert bottom and all(text.lstrip("-").isdigit() for text in bottom), bottom
    assert {int(t) for t in bottom} <= {0, 1, 2, 3, 4}
    for height in (60, 80, 100):
        plot.resize(340, height)
        plot.grab()
        for side in ("left", "bottom"):
            labels = drawn_labels(plot.plotItem.getAxis(side))
            assert labels and not overlapping(labels), (height, side, labels)


def test_heatmap_readout_is_the_steps_own_whole_count(qtbot):
    session, history = lenet_steps(4)
    matrix = history.histogram_matrix("fc1.weight")
    heat = HistogramHeatmap()
    qtbot.addWidget(heat)
    heat.resize(500, 300)
    heat.show_matrix("fc1.weight", matrix)
    edges, _ = matrix.on_common_grid()
    for row, step in enumerate(matrix.steps):
        own = matrix.edges[row]
        y = float(own[len(own) // 2] + own[len(own) // 2 + 1]) / 2  # inside a recorded bin
        text = heat.describe_cell(float(step), y)
        col = int(np.searchsorted(own, y, side="right")) - 1
        assert text.endswith(f"{int(matrix.counts[row, col]):,} values"), text
        assert "." not in text.rpartition(":")[2]  # a whole count, never "7.847"


def test_a_histogram_mostly_at_zero_is_drawn_with_log_counts(qtbot):
    torch.manual_seed(0)
    grad = torch.zeros(10_000)
    grad[:300] = torch.randn(300)  # 97 % exactly zero, as behind a dead ReLU
    counts, edges = np.histogram(grad.numpy(), bins=32)
    from gradexplorer.core.stats.records import Histogram

    plot = HistogramPlot()
    qtbot.addWidget(plot)
    plot.resize(400, 200)
    plot.show_histograms("w", Histogram(edges, counts), None, None)
    _, drawn = plot.current_item.getData()
    assert np.allclose(drawn, np.log10(1 + counts))  # the tails are visible, not a spike
    assert plot.plotItem.getAxis("left").labelText == "log10(1+count) auto"
    bell = np.histogram(torch.randn(10_000).numpy(), bins=32)
    plot.show_histograms("w", Histogram(bell[1], bell[0]), None, None)
    _, drawn = plot.current_item.getData()
    assert np.array_equal(drawn, bell[0].astype(float))  # a shape that reads linearly stays so
    assert plot.plotItem.getAxis("left").labelText == "count"


def test_snapshot_compare_shares_one_scale_and_names_a_and_b(qtbot, tmp_path):
    from gradexplorer.gui.snapshots.snapshot_window import SnapshotWindow

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 2))
    x, y = torch.randn(8, 6), torch.randn(8, 2)
    session = TrainingSession(Workload(model, lambda step: (x, y * (1 + 100 * step)), nn.MSELoss(),
                                       name="grows"), SessionConfig(device="cpu"))
    paths = []
    for _ in range(2):
        session.step()
        paths.append(write_snapshot(tmp_path, session))
    viewer = SnapshotWindow(*paths)  # B's gradients ~100× A's
    qtbot.addWidget(viewer)
    a, b = viewer.flow, viewer.flow_b
    assert a.plotItem.vb.viewRange()[0] == b.plotItem.vb.viewRange()[0]
    assert (a._floor, a._ceiling) == (b._floor, b._ceiling)
    legend = viewer.histogram.plotItem.legend
    assert legend is not None
    assert [label.text for _, label in legend.items] == ["B (filled)", "A (outline)"]


def test_ab_window_draws_both_arms_on_one_axis_with_a_legend(qtbot, make_window):
    from gradexplorer.gui.hooks.ab_window import ABWindow, ab_run_factory

    window = make_window()
    open_model(qtbot, window)
    ab = ABWindow(ab_run_factory(window.controller.session.live, "fc1", "scale:0.5"), 3,
                  window.controller)
    qtbot.addWidget(ab)
    qtbot.waitUntil(lambda: ab.finished, timeout=120_000)
    assert [label.text for _, label in ab.legend.items] == ["A: plain", "B: hooked"]
    for plot in (ab.div_plot, ab.cos_plot):
        assert plot.vb.linkedView(0) is ab.loss_plot.vb  # one step axis


def test_plot_images_are_saved_at_the_chosen_width_and_dpi(qtbot, make_window, tmp_path):
    window = make_window()
    open_model(qtbot, window)
    window.controller.run(2)
    wait_idle(qtbot, window)
    window.gradients.histogram.resize(340, 100)
    path = tmp_path / "histogram.png"
    window.file_actions.save_plot(window.gradients.histogram, "histogram", path)
    image = QImage(str(path))
    assert image.width() == 1600 and image.height() > 100
    assert round(image.dotsPerMeterX() * 0.0254) == 144
    window.settings.set_plot_image_size(800, 300)
    window.file_actions.save_plot(window.gradients.histogram, "histogram", path)
    image = QImage(str(path))
    assert image.width() == 800 and round(image.dotsPerMeterX() * 0.0254) == 300
