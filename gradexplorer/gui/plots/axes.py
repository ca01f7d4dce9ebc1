"""Plot axes that stay readable: tick labels never overlap, and a step axis shows whole steps.

pyqtgraph always draws its major tick labels, however short the axis: in an 80 px plot the
labels of a value axis pile on one another, and a step axis of three steps reads "2.5".
``ReadableAxis`` drops every label that would touch the one before it; ``StepAxis`` puts ticks
on whole numbers only (at least 1 apart) and writes them as integers.
"""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtGui import QFont, QFontMetricsF

from gradexplorer.gui.plots.axis_label import fitted_label

LABEL_GAP = 2  # pixels kept free between two tick labels
SHOWN = 0  # the axis label item's data key holding the html it shows


def _span(text: str, style: dict) -> str:
    css = ";".join(f"{k}: {v}" for k, v in style.items())
    return f"<span style='{css}'>{text}</span>"


def _sized(text: str, style: dict, px: float, base_px: float) -> str:
    """The label's html at ``px`` (its own font size when that is ``base_px``)."""
    return _span(text, style if px == base_px else {**style, "font-size": f"{px}px"})


def _apart(kept: list, rect, vertical: bool) -> bool:
    """Whether ``rect`` keeps LABEL_GAP pixels from every label kept so far."""
    grown = rect.adjusted(0, -LABEL_GAP, 0, LABEL_GAP) if vertical \
        else rect.adjusted(-LABEL_GAP, 0, LABEL_GAP, 0)
    return not any(grown.intersects(other) for other in kept)


class ReadableAxis(pg.AxisItem):
    """An AxisItem whose tick labels never overlap (the more important level wins) and whose
    label fits the axis' length (``axis_label``: words dropped, never the scale; the full label
    in its tooltip)."""

    def labelString(self) -> str:  # noqa: N802 - pyqtgraph API
        if self.labelUnits == "":
            scaled = self.autoSIPrefix and self.autoSIPrefixScale != 1.0
            units = f"(x{1.0 / self.autoSIPrefixScale:g})" if scaled else ""
        else:
            units = f"({self.labelUnitPrefix}{self.labelUnits})"
        full = f"{self.labelText} {units}".strip()
        style = {k: v for k, v in self.labelStyle.items() if k != "font-size"}
        base_px = self._label_px()
        vertical = self.orientation in ("left", "right")
        room = (self.size().height() if vertical else self.size().width()) - 2
        form, px = (full, base_px) if room <= 2 or not full else fitted_label(
            self.labelText, units, lambda text, size: self._label_width(text, size, base_px),
            room, base_px)
        self.label.setToolTip(full if form != full or px != base_px else "")
        return _sized(form, style, px, base_px)

    def _updateLabel(self) -> None:  # noqa: N802 - pyqtgraph API
        html = self.labelString()
        self.label.setData(SHOWN, html)
        self.label.setHtml(html)
        self._adjustSize()
        super().resizeEvent()  # placed for its new length (pyqtgraph places it on resizes only)
        self.update()

    def resizeEvent(self, ev=None):  # noqa: N802 - Qt API
        if self.label is not None:
            html = self.labelString()  # refitted to the new length (resizes come mid-__init__:
            if html != self.label.data(SHOWN):  # the html is kept on the label item itself)
                self.label.setData(SHOWN, html)
                self.label.setHtml(html)
        super().resizeEvent(ev)

    def _label_px(self) -> float:
        font = self.label.font()
        size = self.labelStyle.get("font-size", "")
        if size.endswith("px"):
            return float(size[:-2])
        if size.endswith("pt"):
            return float(size[:-2]) * 96 / 72
        return font.pixelSize() if font.pixelSize() > 0 else font.pointSizeF() * 96 / 72

    def _label_width(self, text: str, px: float, base_px: float) -> float:
        """The label's width with ``text`` at ``px`` (as its QGraphicsTextItem lays it out: the
        text and the document's margin on either side)."""
        font = QFont(self.label.font())
        if px != base_px:
            font.setPixelSize(round(px))
        margin = self.label.document().documentMargin()
        return QFontMetricsF(font).horizontalAdvance(text) + 2 * margin + 1

    def generateDrawSpecs(self, p):  # noqa: N802 - pyqtgraph API
        specs = super().generateDrawSpecs(p)
        if specs is None:
            return None
        axis, ticks, texts = specs
        vertical = self.orientation in ("left", "right")
        kept: list = []
        shown = []
        for rect, flags, text in texts:  # major level first, as pyqtgraph lists them
            if _apart(kept, rect, vertical):
                kept.append(rect)
                shown.append((rect, flags, text))
        return axis, ticks, shown


class StepAxis(ReadableAxis):
    """An axis of step numbers: ticks on whole steps only, labelled as integers.

    ``integers = False`` makes it an ordinary readable axis again (a time axis)."""

    integers = True

    def tickSpacing(self, minVal, maxVal, size):  # noqa: N802 - pyqtgraph API
        levels = super().tickSpacing(minVal, maxVal, size)
        if not self.integers:
            return levels
        whole = [(spacing, offset) for spacing, offset in levels if spacing >= 1]
        if not whole:  # a span of a step or two: every whole step, no finer level
            whole = [(1.0, 0.0)]
        return [(float(max(1, round(spacing))), offset) for spacing, offset in whole]

    def updateAutoSIPrefix(self) -> None:  # noqa: N802 - pyqtgraph API
        if not self.integers:
            super().updateAutoSIPrefix()
            return
        self.autoSIPrefixScale, self.labelUnitPrefix = 1.0, ""  # whole steps are never scaled (an
        self._updateLabel()  # empty plot's 0…0.001 range read "step (x0.001)" beside a "0" tick)

    def tickStrings(self, values, scale, spacing):  # noqa: N802 - pyqtgraph API
        if not self.integers:
            return super().tickStrings(values, scale, spacing)
        return [f"{int(round(v * scale))}" if math.isfinite(v) else "" for v in values]


def readable_axes(plot_item, steps: bool = False) -> None:
    """Give ``plot_item`` a ReadableAxis on the left and on the bottom (a StepAxis when its x
    is a step number), keeping the labels they had."""
    axes = {"left": ReadableAxis("left")}
    axes["bottom"] = StepAxis("bottom") if steps else ReadableAxis("bottom")
    labels = {}
    for side in axes:
        old = plot_item.getAxis(side)
        labels[side] = (old.labelText, old.labelUnits, old.labelUnitPrefix,
                        old.style.get("showValues", True), old.isVisible(), old.grid)
    plot_item.setAxisItems(axes)
    for side, (text, units, prefix, values, visible, grid) in labels.items():
        axis = plot_item.getAxis(side)
        if text or units:
            axis.setLabel(text, units=units or None, unitPrefix=prefix or None)
        axis.setStyle(showValues=values)
        axis.setVisible(visible)
        axis.setGrid(grid)


FLAT = 1e-9  # relative spread below which a series is one value (float rounding): drawn flat
MIN_SPAN = 1e-4  # least span of a linear value axis, relative to its values: its tick labels fit
MIN_LOG_SPAN = 0.1  # least span of a log axis, in decades


def padded_range(lo: float, hi: float, log: bool = False) -> tuple[float, float]:
    """The y range shown for values from ``lo`` to ``hi`` (log10 of them on a log axis): 5%
    padding either side; a series that varies by less than float rounding (relative spread
    below FLAT, or none) is drawn flat in the middle of ±5% of its value (±1 around 0), and a
    span is never so narrow, relative to its values, that the axis' tick labels cannot be
    written in its width (pyqtgraph then draws none): noise is never stretched to fill a plot."""
    spread = hi - lo
    if log:
        least = MIN_LOG_SPAN if spread * math.log(10) >= FLAT else 2 * math.log10(1.05)
        pad = max(spread * 0.05, (least - spread) / 2)
        return lo - pad, hi + pad
    size = max(abs(lo), abs(hi))
    if spread <= FLAT * size or size == 0:
        pad = size * 0.05 or 1.0
        return (lo + hi) / 2 - pad, (lo + hi) / 2 + pad
    pad = max(spread * 0.05, (MIN_SPAN * size - spread) / 2)
    return lo - pad, hi + pad
