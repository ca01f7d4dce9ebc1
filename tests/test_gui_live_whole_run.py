"""Training inside the app: the heat map covers the whole run, not the last 256 steps, while
the history stays within its bound."""

from __future__ import annotations

from tests.gui_helpers import TIMEOUT_MS, open_model, wait_idle

STEPS = 2000


def test_the_live_heat_map_covers_step_one_after_2000_steps(qtbot, make_window):
    window = make_window()
    open_model(qtbot, window, "example:mlp", batch_size=8)
    timeline = window.controller.timeline
    window.controller.run(STEPS)
    qtbot.waitUntil(lambda: timeline.latest is not None and timeline.latest.step == STEPS,
                    timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    history = timeline.gradients
    bound = window.controller.session.live.monitor.history.maxlen
    assert len(history) <= bound < STEPS  # memory: at most the bound's columns
    name = history.latest().columns()[0][0]
    window.selection.select(param=name, source="test")
    window.settle()
    window.gradients.refresh_heatmap()
    shown = window.gradients.heatmap.shown[1].tolist()
    assert shown[0] == 1 and shown[-1] == STEPS and len(shown) <= bound
    assert shown == history.steps()  # the columns are the steps held, labelled by number
    assert len(window.controller.session.live.monitor.history) == bound  # the monitor's own ring: full


def test_unevenly_spaced_steps_are_drawn_under_their_own_numbers(qtbot):
    import numpy as np

    from gradexplorer.core.stats.history import HistogramMatrix
    from gradexplorer.gui.plots.heatmap_plot import HistogramHeatmap

    plot = HistogramHeatmap()
    qtbot.addWidget(plot)
    steps = np.array([1, 9, 17, 25, 31, 32])  # a thinned live history: every 8th and the newest two
    edges = np.linspace(-1.0, 1.0, 5)[None, :].repeat(len(steps), axis=0)
    counts = np.arange(len(steps))[:, None] * np.ones((1, 4))  # row i: all i
    plot.show_matrix("w", HistogramMatrix(steps, edges, counts))
    image = plot.image.image  # value rows × step columns, as drawn
    rect = plot.image.boundingRect()
    width = plot.image.mapRectToParent(rect).width() / image.shape[1]
    left = plot.image.mapRectToParent(rect).left()
    for column in range(image.shape[1]):  # each column shows the step nearest its centre
        centre = left + (column + 0.5) * width
        nearest = int(np.argmin(np.abs(steps - centre)))
        shade = np.log10(1.0 + nearest) if plot.log else nearest  # the image's count scale
        assert image[0, column] == shade, (column, centre)
        assert plot.describe_cell(centre, 0.1).startswith(f"step {steps[nearest]} ")
