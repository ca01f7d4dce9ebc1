"""The gradient-flow chart stays readable at 150 and 4,000 parameters, sorts, and selects."""

from __future__ import annotations

import math

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QImage, QPainter
from PySide6.QtWidgets import QApplication

from gradexplorer.core.stats.records import ParamStats
from gradexplorer.gui.plots.flow_chart import ORDERS, FlowPanel, elide
from gradexplorer.gui.text.name_elide import shared_forms
from gradexplorer.gui.theme import apply_theme


def fake_stats(count: int) -> dict[str, ParamStats]:
    """``count`` parameters in modules of four, with norms spread over decades, one zero."""
    rng = np.random.default_rng(0)
    params = {}
    for i in range(count):
        name = f"encoder.layers.{i // 4}.self_attention.projection_{i % 4}.weight"
        norm = float(10.0 ** rng.uniform(-6, 1))
        params[name] = ParamStats(name, (8, 8), 64, True, norm=norm, abs_max=norm / 3,
                                  nan_count=0, inf_count=0)
    zero = next(iter(params))
    params[zero] = ParamStats(zero, (8, 8), 64, True, norm=0.0, abs_max=0.0, nan_count=0,
                              inf_count=0)
    return params


def left_labels(chart) -> list[tuple]:
    """The tick labels the left axis would paint now: (rect, text) in axis coordinates."""
    axis = chart.plotItem.getAxis("left")
    image = QImage(10, 10, QImage.Format_ARGB32)
    painter = QPainter(image)
    try:
        _axis, _ticks, texts = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    return [(rect, text) for rect, _flags, text in texts]


@pytest.mark.parametrize("count", [150, 4000])
def test_flow_labels_never_overlap_and_every_row_in_view_has_one(qtbot, count):
    panel = FlowPanel()
    qtbot.addWidget(panel)
    panel.resize(420, 600)
    panel.show()
    qtbot.waitExposed(panel)
    chart = panel.chart
    chart.show_stats(fake_stats(count))
    labels = left_labels(chart)
    rows = chart.visible_rows
    assert 20 <= rows < count
    assert len(labels) == rows  # nothing dropped, nothing squeezed in
    rects = sorted((rect for rect, _ in labels), key=lambda r: r.top())
    assert all(a.bottom() <= b.top() + 0.5 for a, b in zip(rects, rects[1:], strict=False))
    axis_width = chart.plotItem.getAxis("left").width()
    assert all(rect.width() <= axis_width for rect in rects)  # labels fit the axis
    assert panel.scroll.isVisible() and panel.scroll.maximum() == count - rows
    panel.scroll.setValue(panel.scroll.maximum())  # scrolled to the end: the last rows show
    texts = [text for _, text in left_labels(chart)]
    assert texts[-1] == elide(chart.shown[-1], chart._label_chars, shared_forms(chart.shown))


def test_flow_sorts_by_magnitude_and_shows_zero_as_zero(qtbot):
    panel = FlowPanel()
    qtbot.addWidget(panel)
    panel.resize(420, 500)
    params = fake_stats(150)
    chart = panel.chart
    chart.show_stats(params)
    assert chart.shown == list(params)  # model order: modules stay together
    panel.order_box.setCurrentText(ORDERS[1])
    peaks = [params[n].abs_max for n in chart.shown]
    assert peaks == sorted(peaks, reverse=True)
    zero = next(iter(params))
    assert chart.shown[-1] == zero
    assert chart.zeros.getData()[1].tolist() == [len(params) - 1.0]  # a zero mark, not "no grad"
    assert len(chart.missing.getData()[1]) == 0
    panel.order_box.setCurrentText(ORDERS[2])
    rms = [params[n].norm / math.sqrt(64) for n in chart.shown if params[n].norm]
    assert rms == sorted(rms)


def test_clicking_a_flow_row_names_its_parameter(qtbot):
    panel = FlowPanel()
    qtbot.addWidget(panel)
    panel.resize(420, 500)
    panel.show()
    qtbot.waitExposed(panel)
    chart = panel.chart
    chart.show_stats(fake_stats(150))
    panel.scroll.setValue(40)
    target = 45
    scene = chart.plotItem.vb.mapViewToScene(QPointF(-3.0, float(target)))
    with qtbot.waitSignal(chart.param_clicked, timeout=30_000) as clicked:
        qtbot.mouseClick(chart.viewport(), Qt.LeftButton, pos=chart.mapFromScene(scene))
    assert clicked.args == [chart.shown[target]]


def narrow_row_names(qtbot, names: list[str]) -> list[str]:
    """The row names a 260-pixel flow chart (the 1024×700 Gradients dock) draws for ``names``,
    in the app's style (the font the window's theme gives: whatever test ran before)."""
    apply_theme(QApplication.instance(), "light")
    panel = FlowPanel()
    qtbot.addWidget(panel)
    panel.resize(260, 400)  # every row in view: the test is about their names
    panel.show()
    qtbot.waitExposed(panel)
    panel.chart.show_stats({n: ParamStats(n, (2,), 2, True, norm=1.0, abs_max=1.0, nan_count=0,
                                          inf_count=0) for n in names})
    return [text for _rect, text in left_labels(panel.chart)]


def test_a_narrow_flow_chart_names_the_block_and_the_parameter(qtbot):
    """In the 1024×700 Gradients dock the rows read 'h.0…weight' (which weight of block 0?)."""
    names = [f"transformer.h.{b}.{m}.weight" for b in (0, 10) for m in ("attn.c_attn", "mlp.c_proj")]
    shown = narrow_row_names(qtbot, names)
    assert shown == ["h.0…c_attn.weight", "h.0…c_proj.weight", "h.10…c_attn.weight", "h.10…c_proj.weight"]


def test_a_narrow_flow_chart_keeps_a_resnet_rows_layer(qtbot):
    """ResNet-18's rows read 'layer1.0…weight' in the 1024×700 Gradients dock: conv1 or conv2?
    Then '…0.conv1.weight' for layer1's and layer2's alike: which layer? Each row keeps both."""
    names = [f"layer{s}.0.{m}" for s in (1, 2) for m in ("conv1.weight", "bn1.bias", "conv2.weight")]
    names.append("layer2.0.shortcut.1.bias")
    shown = narrow_row_names(qtbot, names)
    assert len(set(shown)) == len(shown), shown
    for name, text in zip(names, shown, strict=True):
        layer, block, module = name.split(".")[:3]
        assert text.startswith(f"{layer}.{block}.{module[:2]}") or text == f"…{name.partition('.')[2]}", text


def test_a_narrow_flow_chart_tells_a_blocks_weight_from_its_bias(qtbot):
    """At 1024×700 GPT-2's ``h.0.attn.c_proj.weight`` and ``.bias`` both read
    ``…h.0.attn.c_proj.…`` (their shortest distinct form, ``h.0…c_proj.weight`` being the MLP's
    too, cut on the right): the names take the room their distinct forms need."""
    layers = ("attn.c_attn", "attn.c_proj", "mlp.c_proj")
    names = [f"transformer.h.{b}.{m}.{p}" for b in (0, 1) for m in layers for p in ("weight", "bias")]
    shown = narrow_row_names(qtbot, names)
    assert len(set(shown)) == len(shown), shown
    for name, text in zip(names, shown, strict=True):  # the block, the layer, weight or bias
        assert "h.0" in text or "h.1" in text, text
        assert text.rpartition(".")[2].startswith(name.rpartition(".")[2][0]), text  # w… or b…
