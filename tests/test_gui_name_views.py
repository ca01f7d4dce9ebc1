"""Every view that shortens a parameter name does it by whole components from the left, keeping
the block index (issue 22, item 6): the distributions grid's tiles, the Gradients and Optimizer
headers; the full name in their tooltips."""

from __future__ import annotations

from PySide6.QtCore import QRect
from PySide6.QtGui import QFont, QFontMetrics, QImage, QPainter
from PySide6.QtWidgets import QStyleOptionViewItem, QWidget

from gradexplorer.gui.models.selection import SelectionModel
from gradexplorer.gui.models.timeline import TimelineModel
from gradexplorer.gui.panels.name_label import NameLabel
from gradexplorer.gui.plots.histogram_grid import NAME_ROLE, GridModel, TileDelegate
from gradexplorer.gui.plots.optimizer_curves import OptimizerCurves
from gradexplorer.gui.text.name_elide import name_candidates

GPT_NAME = "transformer.h.10.attn.c_attn.weight"


class RecordingPainter(QPainter):
    """A QPainter that remembers the strings drawn through it."""

    def __init__(self, device) -> None:
        super().__init__(device)
        self.texts: list[str] = []

    def drawText(self, *args) -> None:  # noqa: N802 - Qt API
        self.texts.append(next(a for a in args if isinstance(a, str)))
        super().drawText(*args)


def test_grid_tiles_shorten_names_by_components(qtbot):
    model = GridModel()
    model.show([GPT_NAME], {}, {})
    delegate = TileDelegate(model)
    image = QImage(400, 120, QImage.Format_ARGB32)
    image.fill(0)
    painter = RecordingPainter(image)
    try:
        font = painter.font()
        font.setPointSizeF(max(7.0, font.pointSizeF() * 0.85))
        room = QFontMetrics(font).horizontalAdvance("…h.10.attn.c_attn.weight")
        option = QStyleOptionViewItem()
        option.rect = QRect(0, 0, room + 10, 100)  # the tile's text box is 14 px narrower
        index = model.index(0)
        assert index.data(NAME_ROLE) == GPT_NAME
        delegate.paint(painter, option, index)
    finally:
        painter.end()
    title = painter.texts[0]
    assert title in name_candidates(GPT_NAME) and "h.10" in title and "c_attn" in title, title


def test_name_label_keeps_the_block_index_and_tooltips_the_whole(qtbot):
    holder = QWidget()  # a child of a shown widget gets its resize events at once
    holder.resize(900, 40)
    label = NameLabel("no parameter", parent=holder)
    qtbot.addWidget(holder)
    holder.show()
    qtbot.waitExposed(holder)
    bold = QFont(label.font())
    bold.setBold(True)
    label.setGeometry(0, 0, QFontMetrics(bold).horizontalAdvance("h.10…c_attn.weight") + 8, 20)
    label.set_name(GPT_NAME)
    assert label.text() == "<b>h.10…c_attn.weight</b>" and label.toolTip() == GPT_NAME
    label.setGeometry(0, 0, 880, 20)  # room again: the whole name
    assert label.text() == f"<b>{GPT_NAME}</b>"
    label.set_name(None)
    assert label.text() == "no parameter" and label.toolTip() == ""


def test_optimizer_header_shortens_from_the_left(qtbot):
    curves = OptimizerCurves(SelectionModel(), TimelineModel())
    qtbot.addWidget(curves)
    assert isinstance(curves.name_label, NameLabel)  # was a QLabel cut on the right ("transformer.h.1")


def test_plot_titles_name_the_layer_or_no_name_at_all(qtbot):
    from gradexplorer.gui.plots.histogram_plot import HistogramPlot, titled

    plot = HistogramPlot()
    qtbot.addWidget(plot)
    plot.resize(900, 200)
    plot.show()
    qtbot.waitExposed(plot)
    assert titled(plot, "histogram over steps", "conv1.weight") == "histogram over steps · conv1.weight"
    for width in range(200, 420, 10):  # narrower: the name keeps its layer, or is left out
        plot.resize(width, 200)
        qtbot.waitUntil(lambda width=width: plot.width() == width)
        for name in ("conv1.weight", GPT_NAME):
            title = titled(plot, "histogram over steps", name)
            layer = name.split(".")[-2]
            assert title == "histogram over steps" or f"{layer}." in title, title
