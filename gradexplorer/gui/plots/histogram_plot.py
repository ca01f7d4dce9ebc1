"""One parameter's gradient histogram: the current step, with the previous one ghosted."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontMetrics, QTextOption
from PySide6.QtWidgets import QWidget

from gradexplorer.core.messages.printable import html_text
from gradexplorer.gui.plots.hover import HoverReadout, corner_readout
from gradexplorer.gui.text.name_elide import elide_to_width
from gradexplorer.gui.text.number_text import format_number
from gradexplorer.gui.theme import ALARM, PLOT_PENS, steady_axes, value_ticks


def shown_counts(counts: np.ndarray, log: bool) -> np.ndarray:
    """Counts as drawn: raw, or log10(1 + count)."""
    counts = np.asarray(counts, dtype=float)
    return np.log10(1.0 + counts) if log else counts


SPIKE_SHARE, SPIKE_RATIO = 0.25, 3  # one bin with a quarter of the values and 3x the next:
# linear counts would draw a single spike, so it is drawn with log counts


def spiky(counts) -> bool:
    """Whether linear counts would draw a single spike: the tallest bin holds SPIKE_SHARE of
    the values and SPIKE_RATIO times the next tallest, and other bins hold values too (ReLU
    gradients: most of them exactly 0; a bell curve's tallest bin holds a few percent)."""
    counts = np.sort(np.asarray(counts, dtype=float))[::-1]
    return len(counts) > 1 and counts[1] > 0 and counts[0] >= SPIKE_RATIO * counts[1] \
        and counts[0] >= SPIKE_SHARE * counts.sum()


TITLE_PT = 11  # pyqtgraph's plot title size


def titled(plot, title: str, name: str | None) -> str:
    """``title · name``, the name shortened by components to fit the plot's width (a title
    wider than the plot would widen its layout past the widget and clip the axes)."""
    if not name:
        return title
    font = QFont(plot.font())
    font.setPointSizeF(TITLE_PT)
    advance = QFontMetrics(font).horizontalAdvance
    box = plot.plotItem.vb.width()  # the title is centred over the plot area, not the axes
    room = (box if box > 0 else plot.width() - 80) - advance(f"{title} · ") - 8
    short = elide_to_width(name, advance, room)
    owner = name.split(".")[-2:-1]  # the layer a parameter belongs to ("conv1" of conv1.weight)
    if advance(short) > room or (owner and f"{owner[0]}." not in short):
        return title  # no room for a name that says which layer: the dock's header names it
    return f"{title} · {html_text(short)}"  # (a rich-text title: the name shown as written)


def asks_no_width(label: pg.LabelItem) -> None:
    """Make a plot's title ask for no width of its own: pyqtgraph sets a title's least width
    to its text's at every resize and recolouring (``LabelItem.updateMin``), so a title set
    while the plot was wide kept the plot's layout that wide after the dock narrowed (at
    1024×700 the heat map and its colour bar ran past the dock's right edge, the histogram's
    axis cut); ``titled`` shortens the text to the width there is instead."""
    update_min = label.updateMin

    def narrow() -> None:
        update_min()
        label.setMinimumWidth(0)
        height = label._sizeHint[Qt.SizeHint.MinimumSize][1]
        label._sizeHint[Qt.SizeHint.MinimumSize] = (0, height)
        label._sizeHint[Qt.SizeHint.PreferredSize] = (0, height)
        label.updateGeometry()

    label.updateMin = narrow
    label.asks_no_width = True
    narrow()


class NamedTitle:
    """A plot title ``title · name`` shortened again whenever the plot is resized."""

    _title_parts: tuple[str, str | None] | None = None  # (title, name) once set: Qt resizes the
    # widget while pyqtgraph builds it, before any title is
    note: pg.TextItem | None = None  # a centred note over the plot ("no histogram yet: run a step")

    def wrap_note(self) -> None:
        """Wrap the note to the plot area's width, centred (a one-line note wider than a narrow
        plot ran past both of its edges)."""
        if self.note is None:
            return
        box = self.plotItem.vb.width()
        width = max(40.0, min(box if box > 0 else self.width(), self.width() - 60) - 8)
        if self.note.textItem.textWidth() != width:
            self.note.setTextWidth(width)
            self.note.textItem.document().setDefaultTextOption(QTextOption(Qt.AlignHCenter))

    def set_named_title(self, title: str, name: str | None) -> None:
        self._title_parts = (title, name)
        self._retitle()
        self.setToolTip(name or "")

    def _retitle(self) -> None:
        label = self.plotItem.titleLabel
        if not getattr(label, "asks_no_width", False):
            asks_no_width(label)
        self.plotItem.setTitle(titled(self, *self._title_parts))

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        if self._title_parts is not None and self.plotItem is not None:
            self._retitle()  # (no plot item once pyqtgraph has closed the widget)
            self.wrap_note()


class HistogramPlot(NamedTitle, pg.PlotWidget):
    """Draws with two existing step-curves; ``show`` only calls ``setData``."""

    drawn: tuple = (None, None)  # (parameter, step) of the histogram drawn now

    def __init__(self, parent: QWidget | None = None, title: str = "gradient histogram") -> None:
        super().__init__(parent)
        self.log = False
        self.auto_log, self.auto_shown = True, False  # log counts for a spike (``spiky``)
        self.title = title
        self.set_named_title(title, None)
        self.plotItem.setLabel("bottom", "gradient value")
        self.plotItem.showGrid(x=True, y=True, alpha=0.15)
        self.plotItem.disableAutoRange()  # ranges are set once per redraw (one repaint, not two)
        steady_axes(self.plotItem, left_width=72)  # counts up to 7 digits beside the axis label
        self.previous_item = self.plot(stepMode="center", pen=pg.mkPen(PLOT_PENS["previous"], width=1.5))
        self.current_item = self.plot(stepMode="center", fillLevel=0,
                                      brush=pg.mkBrush(30, 136, 229, 110),
                                      pen=pg.mkPen(PLOT_PENS["current"], width=1.5))
        self.note = pg.TextItem("", anchor=(0.5, 0.5), color=ALARM)
        self.note.setZValue(10)
        self.addItem(self.note, ignoreBounds=True)
        self.readout, self.show_readout = corner_readout(self)  # what is under the mouse
        self.current = None
        self.hover = HoverReadout(self.scene(), [self.plotItem],
                                  lambda _plot, x, _y: self.describe_bin(x), self.show_readout)
        self._set_axis_label()

    def add_legend(self, current: str, previous: str) -> None:
        """Name the filled histogram and the ghosted one in a legend (a compare window)."""
        legend = self.plotItem.addLegend(offset=(-8, 8), labelTextSize="9pt")
        legend.addItem(self.current_item, current)
        legend.addItem(self.previous_item, previous)

    def describe_bin(self, x: float) -> str:
        """``[lo, hi): N values`` for the bin of the current histogram under ``x``."""
        hist = self.current
        if hist is None:
            return ""
        edges = np.asarray(hist.edges, dtype=float)
        if not edges[0] <= x <= edges[-1]:
            return ""
        i = min(int(np.searchsorted(edges, x, side="right")) - 1, len(hist.counts) - 1)
        return (f"[{format_number(edges[i])}, {format_number(edges[i + 1])}): "
                f"{int(hist.counts[i])} values")

    def _set_axis_label(self, auto: bool = False) -> None:
        auto = auto and not self.log
        text = "log10(1+count) auto" if auto else "log10(1 + count)" if self.log else "count"
        self.plotItem.setLabel("left", text)  # (short: a plot 80 px tall clips a long one)
        self.auto_shown = auto

    def set_log(self, log: bool) -> None:
        """Logarithmic counts always (``log``), or linear ones unless the histogram is one
        spike (``spiky``: then log counts, the axis saying "auto"). Applies on the next ``show``."""
        self.log = log
        self._set_axis_label()

    def show_histograms(self, name: str | None, current: Any, previous: Any, stats: Any,
                        step: int | None = None, caption: str = "") -> None:
        """Draw ``current`` (and ``previous`` ghosted); explain when there is nothing to draw.
        ``step``: the step ``current`` is of (``drawn`` says what is drawn: ``(name, step)``),
        ``caption``: ``step 401 of 1600`` when it is not the newest (in the title)."""
        self.set_named_title(f"{self.title} · {caption}" if caption else self.title, name)
        shown, self.current = [], current
        self.drawn = (name, step if current is not None else None)
        auto = self.auto_log and not self.log and current is not None and spiky(current.counts)
        if auto != self.auto_shown:
            self._set_axis_label(auto)
        log = self.log or auto
        for item, hist in ((self.current_item, current), (self.previous_item, previous)):
            if hist is None:
                item.setData([], [])
            else:
                edges, counts = np.asarray(hist.edges, dtype=float), shown_counts(hist.counts, log)
                item.setData(edges, counts)
                shown.append((edges, counts))
        if shown:
            lo = min(float(e[0]) for e, _ in shown)
            hi = max(float(e[-1]) for e, _ in shown)
            top = max(float(c.max()) for _, c in shown) or 1.0
            self.plotItem.vb.setRange(xRange=(lo, hi if hi > lo else lo + 1.0), yRange=(0, top * 1.08),
                                      padding=0.02)
        self._show_note(name, current, stats)

    def _show_note(self, name: str | None, current: Any, stats: Any) -> None:
        text = ""
        if name is None:
            text = "select a parameter"
        elif stats is not None and not stats.has_grad:
            text = "no gradient this step"
        elif current is None:
            text = "no histogram yet: run a step"
        if current is not None and (current.nan_count or current.inf_count):
            text = f"⚠ {current.nan_count} NaN · {current.inf_count} Inf (not binned)"
        if text != self.note.toPlainText():
            self.note.setText(text)
        value_ticks(self.plotItem, current is not None)
        if text:  # centre the note (moving it costs a repaint, so only when shown)
            self.wrap_note()
            view = self.plotItem.vb.viewRange()
            self.note.setPos((view[0][0] + view[0][1]) / 2, (view[1][0] + view[1][1]) / 2)
