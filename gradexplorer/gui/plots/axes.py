"""Plot axes that stay readable: tick labels never overlap, and a step axis shows whole steps.

pyqtgraph always draws its major tick labels, however short the axis: in an 80 px plot the
labels of a value axis pile on one another, and a step axis of three steps reads "2.5".
``ReadableAxis`` drops every label that would touch the one before it; ``StepAxis`` puts ticks
on whole numbers only (at least 1 apart) and writes them as integers.
"""

from __future__ import annotations

import math

import pyqtgraph as pg

LABEL_GAP = 2  # pixels kept free between two tick labels


def _apart(kept: list, rect, vertical: bool) -> bool:
    """Whether ``rect`` keeps LABEL_GAP pixels from every label kept so far."""
    grown = rect.adjusted(0, -LABEL_GAP, 0, LABEL_GAP) if vertical \
        else rect.adjusted(-LABEL_GAP, 0, LABEL_GAP, 0)
    return not any(grown.intersects(other) for other in kept)


class ReadableAxis(pg.AxisItem):
    """An AxisItem whose tick labels never overlap (the more important level wins)."""

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
