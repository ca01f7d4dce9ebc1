"""Gradient flow: typical and largest |g| per parameter (plot_grad_flow, live), readable at any
model size: one row per parameter at a fixed height, scrolled, sorted, grouped by module."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QScrollBar, QVBoxLayout, QWidget

from gradexplorer.gui.graph.legend import reads_whole
from gradexplorer.gui.text.name_elide import elide_chars, shared_forms, shortest_form
from gradexplorer.gui.theme import ALARM, PLOT_PENS

ROW_PX = 17  # pixels per parameter row: every label fits, none overlaps
LABEL_CHARS = 32  # longer names lose components on the left (hover shows them whole)
ORDERS = ("model order", "largest max |g| first", "smallest rms first")  # model order: grouped
# by module, a line between modules
ZERO_COLOUR = "#43a047"
NONE_COLOUR = "#78909c"


def flow_values(params: dict[str, Any]) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """Names, rms |g| (norm/√numel), max |g| (NaN where no grad, and where the gradient holds
    NaN/Inf: its figures then cover only the finite part, which may read 0) and a non-finite flag."""
    names = list(params)
    rms = np.full(len(names), np.nan)
    peak = np.full(len(names), np.nan)
    bad = np.zeros(len(names), dtype=bool)
    for i, name in enumerate(names):
        s = params[name]
        bad[i] = bool(s.nan_count or s.inf_count)
        if s.has_grad and s.norm is not None and not bad[i]:
            rms[i] = s.norm / math.sqrt(max(s.numel, 1))
            peak[i] = s.abs_max if s.abs_max is not None else np.nan
    return names, rms, peak, bad


def row_order(names: list[str], rms: np.ndarray, peak: np.ndarray, order: str) -> np.ndarray:
    """Indices of the rows top to bottom (rows without a figure last when sorting)."""
    index = np.arange(len(names))
    if order == ORDERS[1]:
        key = np.where(np.isfinite(peak), -peak, np.inf)
        return index[np.argsort(key, kind="stable")]
    if order == ORDERS[2]:
        key = np.where(np.isfinite(rms), rms, np.inf)
        return index[np.argsort(key, kind="stable")]
    return index


def elide(name: str, chars: int = LABEL_CHARS, shared: frozenset[str] = frozenset()) -> str:
    """``name`` in at most ``chars`` characters, whole components dropped from the left (the
    block index kept: ``…h.11.attn.c_attn.weight``), never to a form in ``shared`` (one two
    rows would read the same; see ``name_elide``)."""
    return elide_chars(name, chars, shared)


def flow_legend() -> str:
    """The key of the chart's marks (a wrapping label above it: a plot title as wide would
    widen the plot past a narrow dock)."""
    return (f"<span style='color:{PLOT_PENS['max']}'>■</span>&nbsp;max "
            f"<span style='color:{PLOT_PENS['mean']}'>■</span>&nbsp;rms "
            f"<span style='color:{ZERO_COLOUR}'>●</span>&nbsp;exactly&nbsp;0 "
            f"<span style='color:{NONE_COLOUR}'>✕</span>&nbsp;no&nbsp;gradient "
            f"<span style='color:{ALARM}'>▼</span>&nbsp;NaN/Inf")


def group_breaks(names: list[str]) -> list[int]:
    """Rows where a new module starts (in the given order), after the first."""
    owners = [n.rpartition(".")[0] for n in names]
    return [i for i in range(1, len(owners)) if owners[i] != owners[i - 1]]


class GradientFlowChart(pg.PlotWidget):
    """Horizontal bars on a log axis, one fixed-height row per parameter.

    ``first_row`` (the scroll position) and ``visible_rows`` set the window of rows shown;
    ``param_clicked(name)`` when a row is clicked.
    """

    param_clicked = Signal(str)
    rows_changed = Signal()  # row count or the window of rows changed (the scroll bar follows)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.plotItem.setLabel("bottom", "log10 |g|")
        self.plotItem.showGrid(x=True, alpha=0.2)
        self.plotItem.invertY(True)
        self.plotItem.setMouseEnabled(x=False, y=False)
        self.plotItem.setMenuEnabled(False)
        self.plotItem.hideButtons()
        left = self.plotItem.getAxis("left")
        left.setStyle(autoExpandTextSpace=False, hideOverlappingLabels=False)
        self._label_chars = 0
        self._shared: frozenset[str] | None = None  # of the names shown (shared_forms)
        self._need = 0  # characters their shortest distinct forms take
        self._params: dict[str, Any] = {}  # the step shown (show_stats)
        self.peak_bars = pg.BarGraphItem(x0=[], y=[], width=[], height=0.8,
                                         brush=pg.mkBrush(PLOT_PENS["max"]), pen=None)
        self.rms_bars = pg.BarGraphItem(x0=[], y=[], width=[], height=0.5,
                                        brush=pg.mkBrush(PLOT_PENS["mean"]), pen=None)
        self.missing = pg.ScatterPlotItem(symbol="x", size=9, pen=pg.mkPen(NONE_COLOUR, width=2))
        self.zeros = pg.ScatterPlotItem(symbol="o", size=8, brush=pg.mkBrush(ZERO_COLOUR), pen=None)
        self.alarms = pg.ScatterPlotItem(symbol="t", size=11, brush=pg.mkBrush(ALARM), pen=None)
        self.breaks = pg.PlotCurveItem(pen=pg.mkPen("#78909c", width=1), connect="pairs")
        for item in (self.breaks, self.peak_bars, self.rms_bars, self.missing, self.zeros,
                     self.alarms):
            self.addItem(item)
        self.order = ORDERS[0]
        self.first_row = 0
        self.shown: list[str] = []  # parameter names top to bottom
        self._names: list[str] = []
        self._floor = -8.0
        self._ceiling = 0.0
        self._rows: tuple = ([], [], [], [], [])  # names, rms, peak, zero, bad of the rows shown
        self.span: tuple[float, float] | None = None  # log10 range shared with other charts
        self.scene().sigMouseClicked.connect(self._clicked)
        self.scene().sigMouseMoved.connect(self._hovered)

    # -- rows and scrolling ----------------------------------------------------------------
    @property
    def visible_rows(self) -> int:
        """How many rows fit the plot's height at ROW_PX each."""
        height = self.plotItem.vb.height() or max(self.height() - 60, ROW_PX)
        return max(1, int(height // ROW_PX))

    def scroll_to(self, first_row: int) -> None:
        """Show rows from ``first_row`` on."""
        most = max(0, len(self.shown) - self.visible_rows)
        self.first_row = min(max(0, int(first_row)), most)
        self._apply_window()

    def _apply_window(self) -> None:
        top = self.first_row
        self.plotItem.vb.setRange(yRange=(top - 0.5, top + self.visible_rows - 0.5), padding=0)
        self.rows_changed.emit()

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        if "shown" in self.__dict__:  # not while PlotWidget itself is being built
            self._fit_labels()
            self.scroll_to(self.first_row)

    def _fit_labels(self, force: bool = False) -> None:
        """Give the names ~40% of the width, up to 55% where the shortest forms that tell them
        apart need it, and up to 65% where two rows cut to what fits would still read the same
        (GPT-2's ``…h.0.attn.c_proj.weight`` and ``.bias`` cut on the right to 18 characters
        both read ``…h.0.attn.c_proj.…``); shorten them to what fits."""
        metrics = self.fontMetrics()
        char = metrics.horizontalAdvance("abcdefghijklmnopqrstuvwxyz_.0123456789") / 38
        if force or self._shared is None:
            self._shared = shared_forms(self.shown)
            self._need = max((len(shortest_form(n, self._shared)) for n in self.shown), default=0)
        room = max(int(self.width() * 0.4 / char), min(self._need, int(self.width() * 0.55 / char)))
        chars = max(18, min(LABEL_CHARS, room))  # "h.10…c_attn.weight"
        if chars == self._label_chars and not force:
            return
        self._label_chars = chars
        labels = self._labels(chars)
        # two rows cut on the right to the same text (GPT-2's c_proj.weight and .bias at 18
        # characters: "…h.0.attn.c_proj.…"): a character more each, up to 65% of the width
        widest = min(LABEL_CHARS, int(self.width() * 0.65 / char))
        while len(set(labels)) < len(labels) and chars < widest:
            chars += 1
            labels = self._labels(chars)
        longest = max((len(text) for text in labels), default=chars)
        axis = self.plotItem.getAxis("left")
        axis.setWidth(int(min(longest, chars) * char * 1.08) + 14)
        axis.setTicks([list(enumerate(labels))])
        self.plotItem.layout.activate()  # the new axis width now, not at the next event loop

    def _labels(self, chars: int) -> list[str]:
        """The rows' names in ``chars`` characters: whole where they fit, else the longest form
        no other row shares (``elide``)."""
        shared = self._shared
        return [elide(n, chars, shared) if len(n) > chars or n in shared else n for n in self.shown]

    def wheelEvent(self, event) -> None:  # noqa: N802 - Qt API
        self.scroll_to(self.first_row - round(event.angleDelta().y() / 40))
        event.accept()

    def set_order(self, order: str) -> None:
        """Row order: one of ORDERS."""
        self.order = order
        self._names = []  # rebuild labels
        self.show_stats(self._params)

    # -- data ------------------------------------------------------------------------------
    def show_stats(self, params: dict[str, Any]) -> None:
        """Redraw from one step's ParamStats."""
        self._params = params
        names, rms, peak, bad = flow_values(params)
        rows = row_order(names, rms, peak, self.order)
        names = [names[i] for i in rows]
        rms, peak, bad = rms[rows], peak[rows], bad[rows]
        zero = np.array([params[n].has_grad and params[n].norm == 0 for n in names], dtype=bool) & ~bad
        if names != self._names:
            self._names, self.shown = names, names
            self._fit_labels(force=True)
            self._draw_breaks(names)
            self.scroll_to(self.first_row if self.order == ORDERS[0] else 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_rms, log_peak = np.log10(rms), np.log10(peak)
        finite = np.isfinite(log_rms) & np.isfinite(log_peak)
        self._floor = math.floor(np.min(log_rms[finite])) - 1 if finite.any() else -8.0
        self._ceiling = math.ceil(np.max(log_peak[finite])) if finite.any() else 0.0
        if self.span is not None:  # one scale with other charts (``share_span``)
            self._floor, self._ceiling = min(self._floor, self.span[0]), max(self._ceiling, self.span[1])
        floor, y = self._floor, np.arange(len(names), dtype=float)
        self.peak_bars.setOpts(x0=np.full(finite.sum(), floor), y=y[finite],
                               width=log_peak[finite] - floor)
        self.rms_bars.setOpts(x0=np.full(finite.sum(), floor), y=y[finite],
                              width=log_rms[finite] - floor)
        none = ~finite & ~zero & ~bad
        self.missing.setData(np.full(none.sum(), floor), y[none])
        self.zeros.setData(np.full(zero.sum(), floor), y[zero])
        self.alarms.setData(np.full(bad.sum(), floor), y[bad])
        self.plotItem.vb.setRange(xRange=(floor, max(self._ceiling, floor + 1)), padding=0.02)
        self._rows = (names, rms, peak, zero, bad)  # a row's tooltip is written when hovered
        if not names:
            self.plotItem.vb.setRange(yRange=(0, 1), padding=0)
            self.rows_changed.emit()

    def tip(self, row: int) -> str:
        """The tooltip of ``row`` ("" : no such row)."""
        names, rms, peak, zero, bad = self._rows
        if not 0 <= row < len(names):
            return ""
        name = names[row]
        return self._tip(name, rms[row], peak[row], zero[row], self._params[name] if bad[row] else None)

    @staticmethod
    def _tip(name: str, rms: float, peak: float, zero: bool, bad: Any = None) -> str:
        if bad is not None:
            return f"{name}\ngradient holds {bad.nan_count or 0} NaN and {bad.inf_count or 0} ±Inf"
        if zero:
            return f"{name}\nall gradients exactly 0"
        if not np.isfinite(peak):
            return f"{name}\nno gradient this step"
        return f"{name}\nmax |g| {peak:.4g} · rms {rms:.4g}"

    def _draw_breaks(self, names: list[str]) -> None:
        if self.order != ORDERS[0]:
            self.breaks.setData([], [])
            return
        ys = np.repeat(np.array(group_breaks(names), dtype=float) - 0.5, 2)
        xs = np.tile([-60.0, 60.0], len(ys) // 2)
        self.breaks.setData(xs, ys, connect="pairs")

    def row_at(self, scene_pos) -> int:
        """The row under a scene position, or -1."""
        if not self.plotItem.vb.sceneBoundingRect().contains(scene_pos):
            return -1
        row = round(self.plotItem.vb.mapSceneToView(scene_pos).y())
        return row if 0 <= row < len(self.shown) else -1

    def _clicked(self, event) -> None:
        row = self.row_at(event.scenePos())
        if row >= 0:
            self.param_clicked.emit(self.shown[row])

    def _hovered(self, scene_pos) -> None:
        row = self.row_at(scene_pos)
        self.setToolTip(self.tip(row))


def share_span(charts: list[GradientFlowChart]) -> tuple[float, float]:
    """Draw ``charts`` (each showing its own step already) on one log10 |g| scale, the span of
    them all: bars of equal length are equal figures across the charts (a compare window)."""
    for chart in charts:
        chart.span = None
        chart.show_stats(chart._params)
    span = (min(c._floor for c in charts), max(c._ceiling for c in charts))
    for chart in charts:
        chart.span = span
        chart.show_stats(chart._params)
    return span


class FlowPanel(QWidget):
    """The chart with its order chooser and a scroll bar over its rows."""

    def __init__(self, parent: QWidget | None = None, title: str = "gradient flow") -> None:
        super().__init__(parent)
        self.chart = GradientFlowChart()
        self.order_box = QComboBox(toolTip="order of the parameter rows")
        self.order_box.addItems(ORDERS)
        reads_whole(self.order_box)  # "largest max |g| first" whole, the title beside it gives way
        self.order_box.currentTextChanged.connect(self.chart.set_order)
        self.scroll = QScrollBar(Qt.Vertical)
        self.scroll.valueChanged.connect(self.chart.scroll_to)
        self.chart.rows_changed.connect(self._follow_chart)
        header = QHBoxLayout()
        header.setContentsMargins(0, 0, 0, 0)
        header.addWidget(QLabel(f"<b>{title}</b>"))
        header.addWidget(self.order_box)
        header.addStretch(1)
        body = QHBoxLayout()
        body.setContentsMargins(0, 0, 0, 0)
        body.setSpacing(0)
        body.addWidget(self.chart, 1)
        body.addWidget(self.scroll)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        self.legend = QLabel(flow_legend(), wordWrap=True)
        layout.addLayout(header)
        layout.addWidget(self.legend)
        layout.addLayout(body, 1)

    def _follow_chart(self) -> None:
        chart = self.chart
        self.scroll.blockSignals(True)
        self.scroll.setRange(0, max(0, len(chart.shown) - chart.visible_rows))
        self.scroll.setPageStep(chart.visible_rows)
        self.scroll.setValue(chart.first_row)
        self.scroll.blockSignals(False)
        self.scroll.setVisible(len(chart.shown) > chart.visible_rows)
