"""The gradients dock: alarm, selected parameter's histogram and heat map, gradient flow."""

from __future__ import annotations

import time

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QSplitter, QVBoxLayout, QWidget

from gradexplorer.gui.plots.alarm_banner import AlarmBanner
from gradexplorer.gui.plots.flow_chart import GradientFlowChart
from gradexplorer.gui.plots.heatmap_plot import HistogramHeatmap
from gradexplorer.gui.plots.histogram_plot import HistogramPlot
from gradexplorer.gui.selection import Selection, SelectionModel
from gradexplorer.gui.timeline import Timeline

SLOW_PLOTS_S = 0.1  # heat map and flow chart take turns, each redrawn about 5 times a second


def parameter_for(selection: Selection, model) -> str | None:
    """The parameter the plots should show for a selection (a module's first parameter)."""
    if selection.param:
        return selection.param
    if selection.module is None or model is None:
        return None
    try:
        module = model.get_submodule(selection.module)
    except AttributeError:
        return None
    for name, _ in module.named_parameters():
        return f"{selection.module}.{name}" if selection.module else name
    return None


class GradientPanel(QWidget):
    """Observes the selection and the timeline; redraws with existing plot items."""

    def __init__(self, selection: SelectionModel, timeline: Timeline,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.selection, self.timeline = selection, timeline
        self.model = None
        self.param: str | None = None
        self._slow_at = 0.0
        self.alarm = AlarmBanner()
        self.param_label = QLabel("no parameter selected")
        self.log_box = QCheckBox("log counts")
        self.log_box.toggled.connect(self.set_log)
        self.histogram = HistogramPlot()
        self.heatmap = HistogramHeatmap()
        self.flow = GradientFlowChart()
        header = QHBoxLayout()
        header.addWidget(self.param_label, 1)
        header.addWidget(self.log_box)
        split = QSplitter(Qt.Vertical)
        for plot in (self.histogram, self.heatmap, self.flow):
            split.addWidget(plot)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.alarm)
        layout.addLayout(header)
        layout.addWidget(split, 1)
        selection.changed.connect(self._selection_changed)

    def set_model(self, model) -> None:
        """A new model: pick its first parameter until the user selects another."""
        self.model = model
        first = next((n for n, _ in model.named_parameters()), None)
        self.param = parameter_for(self.selection.current, model) or first
        if self.timeline.latest_gradients is None:
            self.flow.show_stats({})  # nothing of the last model's run stays
        self.refresh(force=True)

    def set_log(self, log: bool) -> None:
        """Linear or logarithmic counts in the histogram and heat map."""
        self.histogram.set_log(log)
        self.heatmap.set_log(log)
        self.refresh(force=True)

    def _selection_changed(self, selection: Selection) -> None:
        param = parameter_for(selection, self.model)
        if param and param != self.param:
            self.param = param
            self.refresh(force=True)

    def refresh(self, _update=None, force: bool = False) -> None:
        """Redraw the alarm and the histogram (and, with ``force``, the slower plots too)."""
        latest = self.timeline.latest_gradients
        self.alarm.show_gradients(latest)
        name = self.param
        stats = latest.params.get(name) if latest is not None and name else None
        self.param_label.setText(f"<b>{name}</b>" if name else "no parameter selected")
        current, previous = self.timeline.histograms_of(name) if name else (None, None)
        self.histogram.show_histograms(name, current, previous, stats)
        if force:
            self.refresh_slow(force=True)

    def refresh_slow(self, force: bool = False) -> None:
        """Redraw the heat map and the flow chart, at most every SLOW_PLOTS_S unless forced."""
        now = time.monotonic()
        if not force and now - self._slow_at < SLOW_PLOTS_S:
            return
        self._slow_at = now
        name, latest = self.param, self.timeline.latest_gradients
        self._slow_turn = not getattr(self, "_slow_turn", False)
        if force or self._slow_turn:  # heat map and flow chart take turns: one repaint per call
            self.heatmap.show_matrix(name, self.timeline.gradients.histogram_matrix(name) if name else None)
        if latest is not None and (force or not self._slow_turn):
            self.flow.show_stats(latest.params)
