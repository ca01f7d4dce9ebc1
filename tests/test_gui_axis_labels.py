"""Axis labels fit their axis (issue 22, item 2): in a 1024×700 window a plot is ~100 px tall,
and pyqtgraph centres a longer label on the axis, cutting both ends — the scale of the tick
figures ("(x0.001)") first. A label that does not fit drops words, never the scale; the full
label is in its tooltip."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg

from gradexplorer.gui.plots.axis_label import compact_scale, fitted_label, label_forms
from gradexplorer.gui.theme import steady_axes
from tests.gui_helpers import open_model, wait_idle


def label_fits(axis) -> bool:
    """Whether ``axis``'s label lies wholly along the axis (long enough, and placed on it)."""
    placed = axis.label.mapRectToParent(axis.label.boundingRect())
    if axis.orientation in ("left", "right"):
        return placed.top() >= -1 and placed.bottom() <= axis.size().height() + 1
    return placed.left() >= -1 and placed.right() <= axis.size().width() + 1


def test_label_forms_keep_the_scale():
    assert compact_scale("(x0.001)") == "(×1e-3)" and compact_scale("(mV)") == "(mV)"
    forms = label_forms("gradient value", "(x0.001)")
    assert forms[0] == "gradient value (x0.001)" and forms[-1] == "(×1e-3)"
    assert all("(x0.001)" in f or "(×1e-3)" in f for f in forms)
    assert label_forms("log10(1 + count)", "") == ["log10(1 + count)", "log10(1+count)", "log10(1+n)",
                                                  "lg(1+n)"]


def test_the_auto_log_count_label_keeps_its_font_in_a_short_histogram(qtbot):
    """'log10(1+count) auto' was shrunk to 7 px in the 1024×700 Gradients dock."""
    from gradexplorer.core.stats.records import Histogram
    from gradexplorer.gui.plots.histogram_plot import HistogramPlot

    assert label_forms("log10(1+count) auto", "")[-2:] == ["log10(1+n) auto", "lg(1+n) auto"]
    plot = HistogramPlot()
    qtbot.addWidget(plot)
    plot.resize(260, 180)  # the 1024×700 Gradients dock's histogram (its left axis 110 px)
    plot.show()
    qtbot.waitExposed(plot)
    counts = np.zeros(32, dtype=np.int64)
    counts[16], counts[3] = 10_000, 3  # one spike: log counts, chosen automatically
    plot.show_histograms("w", Histogram(np.linspace(-1, 1, 33), counts), None, None)
    axis = plot.plotItem.getAxis("left")
    qtbot.waitUntil(lambda: "auto" in axis.label.toPlainText())
    assert axis.label.toPlainText() in ("log10(1+n) auto", "lg(1+n) auto")
    assert label_fits(axis) and "font-size" not in axis.labelString()  # not made smaller
    assert axis.label.toolTip() == "log10(1+count) auto"


def test_a_scaled_label_fits_a_short_plot_and_keeps_its_scale(qtbot):
    plot = pg.PlotWidget()
    qtbot.addWidget(plot)
    plot.plotItem.setLabel("left", "gradient value")
    plot.plotItem.setLabel("bottom", "gradient value")
    steady_axes(plot.plotItem)
    values = np.linspace(-0.02, 0.02, 50)
    plot.plot(values, values)
    plot.resize(200, 110)  # a histogram of the 1024×700 window's Gradients dock
    plot.show()
    qtbot.waitExposed(plot)
    for side in ("left", "bottom"):
        axis = plot.plotItem.getAxis(side)
        qtbot.waitUntil(lambda axis=axis: axis.autoSIPrefixScale != 1.0)  # the range is drawn
        text = axis.label.toPlainText()
        assert label_fits(axis) and ("1e-3" in text or "0.001" in text), (side, text)
        assert axis.label.toolTip() == "gradient value (x0.001)"
    plot.resize(700, 500)  # room again: the full label, no tooltip needed
    qtbot.waitUntil(lambda: plot.plotItem.getAxis("left").label.toPlainText()
                    == "gradient value (x0.001)")
    assert plot.plotItem.getAxis("left").label.toolTip() == ""


def test_every_axis_label_of_a_1024x700_window_is_whole(qtbot, make_window):
    window = make_window()
    window.resize(1024, 700)
    open_model(qtbot, window, "example:digits")
    for _ in range(3):
        window.controller.step()
        wait_idle(qtbot, window)
    assert window.controller.timeline.latest.step == 3
    window.selection.select(param="fc2.weight", source="table")
    wait_idle(qtbot, window)
    cut = []
    for widget in window.findChildren(pg.PlotWidget):
        if not widget.isVisible():
            continue
        for axis in [i for i in widget.scene().items() if isinstance(i, pg.AxisItem)]:  # colour bars too
            drawn = min(axis.size().width(), axis.size().height()) > 0  # (0 px: not on screen)
            if drawn and axis.isVisible() and axis.label.isVisible() and axis.label.toPlainText() \
                    and not label_fits(axis):
                cut.append((type(widget).__name__, axis.orientation, axis.label.toPlainText(),
                            axis.label.boundingRect().width(), axis.size()))
    assert not cut


def test_a_plot_note_wraps_inside_a_narrow_plot(qtbot):
    from gradexplorer.gui.plots.histogram_plot import HistogramPlot

    plot = HistogramPlot()
    qtbot.addWidget(plot)
    plot.resize(200, 140)  # the 1024×700 window's Gradients dock
    plot.show()
    qtbot.waitExposed(plot)
    plot.show_histograms("transformer.h.10.attn.c_attn.weight", None, None, None)
    assert plot.note.toPlainText() == "no histogram yet: run a step"
    box = plot.plotItem.vb.sceneBoundingRect()

    def inside() -> bool:
        note = plot.note.sceneBoundingRect()
        return note.left() >= box.left() - 1 and note.right() <= box.right() + 1

    qtbot.waitUntil(inside)  # wrapped to the plot's width: not cut at both edges


def test_a_step_axis_is_never_scaled(qtbot):
    from gradexplorer.gui.plots.heatmap_plot import HistogramHeatmap

    heat = HistogramHeatmap()  # no data yet: pyqtgraph's placeholder range is tiny
    qtbot.addWidget(heat)
    heat.resize(300, 200)
    heat.show()
    qtbot.waitExposed(heat)
    heat.plotItem.setXRange(0, 0.001)
    axis = heat.plotItem.getAxis("bottom")
    assert axis.autoSIPrefixScale == 1.0 and axis.label.toPlainText() == "step"


def test_a_label_keeps_a_word_in_a_smaller_font_before_only_its_scale():
    def width(text, px):  # 0.6 px per character per px of font, as a typical sans
        return len(text) * px * 0.6

    form, px = fitted_label("global ‖g‖", "(x0.001)", width, 70, 12)
    assert form == "‖g‖ (×1e-3)" and px < 12  # not "(×1e-3)": which curve is it?
    assert fitted_label("global ‖g‖", "(x0.001)", width, 40, 12)[0] == "(×1e-3)"
