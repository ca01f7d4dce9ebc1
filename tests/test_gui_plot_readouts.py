"""Loss/norm curves: visible log-scale and smoothing toggles, value readout on hover; the
histogram's and heat map's hover readouts; the heat map's colour bar; zero written as 0."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF

from gradexplorer.core.stats.records import Histogram
from gradexplorer.gui.models.timeline import StepPoint, TimelineModel
from gradexplorer.gui.plots.curves import TrainingCurves, ema
from gradexplorer.gui.plots.heatmap_plot import HistogramHeatmap
from gradexplorer.gui.plots.histogram_plot import HistogramPlot
from gradexplorer.gui.text.number_text import format_number


def test_curve_toggles_and_hover_readout(qtbot):
    timeline = TimelineModel()
    curves = TrainingCurves(timeline)
    qtbot.addWidget(curves)
    curves.resize(800, 300)
    curves.show()
    losses = [4.0, 2.0, 1.0, 0.5, 0.25]
    timeline.extend([StepPoint(i + 1, v, v * 3, 0.01) for i, v in enumerate(losses)], 10.0)
    curves.refresh()
    assert curves.log_box.isVisible() and curves.smooth_box.isVisible()
    curves.log_box.setChecked(True)  # a click on the visible box: both plots go log
    assert curves.loss_plot.ctrl.logYCheck.isChecked() and curves.norm_plot.ctrl.logYCheck.isChecked()
    low, high = curves.loss_plot.vb.viewRange()[1]
    assert low < np.log10(0.25) < np.log10(4.0) < high  # the range is in log10 units
    curves.log_box.setChecked(False)
    curves.smooth_box.setChecked(True)
    _, shown = curves.loss_item.getData()
    expected = [losses[0]]
    for i in range(2, len(losses) + 1):  # the debiased EMA by hand
        num = sum(0.1 * 0.9 ** (i - 1 - k) * losses[k] for k in range(i))
        expected.append(num / (1 - 0.9 ** i))
    assert np.allclose(shown, expected, rtol=1e-12)
    assert np.array_equal(curves.loss_raw.getData()[1], losses)  # raw stays, faded
    curves.smooth_box.setChecked(False)
    pos = curves.loss_plot.vb.mapViewToScene(QPointF(3.2, 1.0))
    curves.plots.scene().sigMouseMoved.emit(pos)
    qtbot.waitUntil(lambda: curves.readout.text() != "", timeout=30_000)
    assert curves.readout.text() == "step 3 · loss 1"
    pos = curves.norm_plot.vb.mapViewToScene(QPointF(5.0, 1.0))
    curves.plots.scene().sigMouseMoved.emit(pos)
    qtbot.waitUntil(lambda: "gradient norm" in curves.readout.text(), timeout=30_000)
    assert curves.readout.text() == "step 5 · gradient norm 0.75"


def test_ema_keeps_nan_gaps():
    out = ema(np.array([1.0, np.nan, 3.0]))
    assert np.isnan(out[1]) and out[0] == 1.0 and np.isclose(out[2], (0.09 + 0.3) / (1 - 0.81))


def test_histogram_hover_reads_out_the_bin(qtbot):
    plot = HistogramPlot()
    qtbot.addWidget(plot)
    plot.resize(500, 300)
    plot.show()
    hist = Histogram(np.array([-1.0, 0.0, 1.0, 2.0]), np.array([3, 0, 7]))
    plot.show_histograms("w", hist, None, None)
    pos = plot.plotItem.vb.mapViewToScene(QPointF(1.5, 1.0))
    plot.scene().sigMouseMoved.emit(pos)
    qtbot.waitUntil(lambda: plot.readout.toPlainText() != "", timeout=30_000)
    assert plot.readout.toPlainText() == "[1, 2): 7 values"
    assert plot.describe_bin(0.5) == "[0, 1): 0 values"  # zero as zero


def test_heatmap_has_a_colour_bar_following_its_levels(qtbot):
    from gradexplorer.core.stats.history import HistogramMatrix

    heat = HistogramHeatmap()
    qtbot.addWidget(heat)
    heat.resize(500, 300)
    heat.show()
    edges = np.array([[0.0, 1.0, 2.0], [0.0, 1.0, 2.0]])
    counts = np.array([[1, 9], [99, 0]])
    heat.set_log(False)
    heat.show_matrix("w", HistogramMatrix(np.array([1, 2]), edges, counts))
    assert isinstance(heat.colour_bar, pg.ColorBarItem)
    assert heat.colour_bar.scene() is heat.scene() and heat.colour_bar.isVisible()
    assert tuple(heat.colour_bar.levels()) == (0.0, 99.0) and tuple(heat.image.levels) == (0.0, 99.0)
    assert heat.describe_cell(2.3, 0.5) == "step 2 · [0, 1): 99 values"
    assert heat.image.mapRectToParent(heat.image.boundingRect()).left() == 0.5  # centred on step 1
    assert heat.describe_cell(1.4, 1.5) == "step 1 · [1, 2): 9 values"


def test_zero_is_written_as_zero():
    assert (format_number(0.0), format_number(-0.0), format_number(None)) == ("0", "0", "")
    assert format_number(1.5e-7) == "1.5e-07"


def test_a_single_step_is_drawn_as_a_point(qtbot):
    timeline = TimelineModel()
    curves = TrainingCurves(timeline)
    qtbot.addWidget(curves)
    timeline.extend([StepPoint(1, 2.5, 7.0, 0.01)], 1.0)
    curves.refresh()
    assert curves.loss_item.opts["symbol"] == "o" and curves.norm_item.opts["symbol"] == "o"
    timeline.extend([StepPoint(2, 2.0, 6.0, 0.01)], 1.0)
    curves.refresh()
    assert curves.loss_item.opts["symbol"] is None and curves.norm_item.opts["symbol"] is None


def test_a_move_held_back_by_the_rate_limit_after_its_plot_closed_is_ignored(qtbot):
    """The hover proxy's rate limit delivers the last move later; when the plot's window closed
    meanwhile (a test ending, a dock rebuilt) the readout shows nothing and raises nothing (it
    raised 'Internal C++ object (ViewBox) already deleted' in the next test's event loop)."""
    from gradexplorer.gui.plots.hover import HOVER_RATE, HoverReadout

    widget = pg.PlotWidget()
    qtbot.addWidget(widget)
    shown: list[str] = []
    readout = HoverReadout(widget.scene(), [widget.plotItem], lambda p, x, y: f"{x:.1f}",
                           shown.append)
    widget.show()
    qtbot.waitExposed(widget)
    widget.scene().sigMouseMoved.emit(QPointF(5, 5))
    widget.scene().sigMouseMoved.emit(QPointF(6, 6))  # held back by the rate limit
    widget.close()
    qtbot.wait(int(3000 / HOVER_RATE))  # the held move arrives after the close
    readout.moved((QPointF(6, 6),))
    assert all(isinstance(text, str) for text in shown)
