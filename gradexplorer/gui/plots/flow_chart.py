"""Gradient flow: typical and largest |g| per parameter, layer by layer (plot_grad_flow, live)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QWidget

from gradexplorer.gui.theme import ALARM, PLOT_PENS


def flow_values(params: dict[str, Any]) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """Names, rms |g| (norm/√numel), max |g| (NaN where no grad) and a non-finite flag."""
    names = list(params)
    rms = np.full(len(names), np.nan)
    peak = np.full(len(names), np.nan)
    bad = np.zeros(len(names), dtype=bool)
    for i, name in enumerate(names):
        s = params[name]
        if s.has_grad and s.norm is not None:
            rms[i] = s.norm / math.sqrt(max(s.numel, 1))
            peak[i] = s.abs_max if s.abs_max is not None else np.nan
        bad[i] = bool(s.nan_count or s.inf_count)
    return names, rms, peak, bad


class GradientFlowChart(pg.PlotWidget):
    """Horizontal bars on a log axis; parameters top to bottom in model order."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.plotItem.setTitle(
            f"gradient flow <span style='color:{PLOT_PENS['max']}'>■ max |g|</span> "
            f"<span style='color:{PLOT_PENS['mean']}'>■ rms</span> "
            "<span style='color:#78909c'>✕ none</span>", size="10pt")
        self.plotItem.setLabel("bottom", "log10 |g|")
        self.plotItem.showGrid(x=True, alpha=0.2)
        self.plotItem.invertY(True)
        self.peak_bars = pg.BarGraphItem(x0=[], y=[], width=[], height=0.8,
                                         brush=pg.mkBrush(PLOT_PENS["max"]), pen=None)
        self.rms_bars = pg.BarGraphItem(x0=[], y=[], width=[], height=0.5,
                                        brush=pg.mkBrush(PLOT_PENS["mean"]), pen=None)
        self.missing = pg.ScatterPlotItem(symbol="x", size=9, pen=pg.mkPen("#78909c", width=2))
        self.alarms = pg.ScatterPlotItem(symbol="t", size=11, brush=pg.mkBrush(ALARM), pen=None)
        for item in (self.peak_bars, self.rms_bars, self.missing, self.alarms):
            self.addItem(item)

        self._names: list[str] = []

    def show_stats(self, params: dict[str, Any]) -> None:
        """Redraw from one step's ParamStats."""
        names, rms, peak, bad = flow_values(params)
        if names != self._names:
            self._names = names
            axis = self.plotItem.getAxis("left")
            every = max(1, math.ceil(len(names) / 40))  # keep labels legible on big models
            axis.setTicks([[(i, n) for i, n in enumerate(names) if i % every == 0]])
        with np.errstate(divide="ignore", invalid="ignore"):
            log_rms, log_peak = np.log10(rms), np.log10(peak)
        finite = np.isfinite(log_rms) & np.isfinite(log_peak)
        floor = math.floor(np.min(log_rms[finite])) - 1 if finite.any() else -8.0
        y = np.arange(len(names), dtype=float)
        if not names:
            self.plotItem.vb.setRange(yRange=(0, 1), padding=0)
        self.peak_bars.setOpts(x0=np.full(finite.sum(), floor), y=y[finite],
                               width=log_peak[finite] - floor)
        self.rms_bars.setOpts(x0=np.full(finite.sum(), floor), y=y[finite],
                              width=log_rms[finite] - floor)
        self.missing.setData(np.full((~finite).sum(), floor), y[~finite])
        self.alarms.setData(np.full(bad.sum(), floor), y[bad])
