"""The app and the report draw the same runs in the same colours and their heat maps in the same
colour map (issue 41: the report had a palette and a viridis of its own)."""

import re

import numpy as np

from gradexplorer.core.share import png, svg_charts
from gradexplorer.gui.models.run_overlay import PALETTE


def test_the_reports_curves_take_the_apps_run_colours_in_order():
    x = np.array([0.0, 1.0])
    chart = svg_charts.line_chart([("a", x, x + 1), ("b", x, 2 - x), ("c", x, x)])
    assert re.findall(r'stroke="(#[0-9a-f]{6})" class="curve"', chart) == list(PALETTE[:3])


def test_the_reports_heat_map_colours_are_the_apps_colour_bar(qtbot):
    from gradexplorer.gui.plots.heatmap_plot import HistogramHeatmap

    plot = HistogramHeatmap()
    qtbot.addWidget(plot)
    app_colours = plot.colour_bar.colorMap().getLookupTable(nPts=256, alpha=False)
    counts = np.arange(1.0, 65.0).reshape(64, 1) * np.ones((1, 3))  # every level from 1 to 64
    report_colours = png.heat_image(counts).reshape(-1, 3)
    assert len({tuple(c) for c in report_colours}) > 30
    assert {tuple(c) for c in report_colours} <= {tuple(int(v) for v in c) for c in app_colours}
