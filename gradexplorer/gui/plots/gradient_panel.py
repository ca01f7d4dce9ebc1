"""The gradients dock: alarm, selected parameter's histogram and heat map, gradient flow.

The heat map covers the steps the timeline holds for the live session, and the whole run
(at most HEATMAP_STEPS steps drawn, evenly spread) for a run directory (``set_run``)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from gradexplorer.core.runs.history import RunHistory
from gradexplorer.core.stats.curves import thin_steps
from gradexplorer.gui.graph.legend import reads_whole
from gradexplorer.gui.models.selection import Selection, SelectionModel, parameter_for, step_caption
from gradexplorer.gui.models.timeline import TimelineModel
from gradexplorer.gui.panels.name_label import NameLabel
from gradexplorer.gui.plots.alarm_banner import AlarmBanner
from gradexplorer.gui.plots.flow_chart import FlowPanel
from gradexplorer.gui.plots.heatmap_axes import AXIS_MODES, AXIS_TIPS
from gradexplorer.gui.plots.heatmap_plot import HistogramHeatmap
from gradexplorer.gui.plots.histogram_plot import HistogramPlot
from gradexplorer.gui.theme import SELECTION
from gradexplorer.gui.throttle import throttled

HISTOGRAM_MS = 50  # the histogram and the alarm redraw at most 20 times a second
PLOT_HEIGHTS = (150, 150, 150, 170)  # the least each plot gets: 80+ pixels of plot area inside
# axes and title; a dock shorter than their sum scrolls instead of squeezing them
HEATMAP_MS, FLOW_MS = 100, 120  # heavier: about 10 times a second, on their own timers (no
# leading-edge call), with periods that rarely coincide, so a step never triggers every redraw
# in one tick of the GUI thread
HEATMAP_STEPS = 600  # columns of a whole run's heat map (evenly spread, first and last kept)


class GradientPanel(QWidget):
    """Observes the selection and the timeline; redraws with existing plot items.

    Each plot has its own throttle on ``timeline.changed``; ``flush`` draws pending redraws now.
    """

    def __init__(self, selection: SelectionModel, timeline: TimelineModel,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.selection, self.timeline = selection, timeline
        self.model = None
        self.param: str | None = None
        self.run_history: RunHistory | None = None  # a run directory: the heat map covers it all
        self._step: int | None = None  # the selection's step drawn (None: live)
        self._throttles = (throttled(self.refresh_histogram, timeout=HISTOGRAM_MS, parent=self),
                           throttled(self.refresh_heatmap, timeout=HEATMAP_MS, leading=False,
                                      parent=self),
                           throttled(self.refresh_flow, timeout=FLOW_MS, leading=False, parent=self))
        for throttle in self._throttles:
            timeline.changed.connect(throttle)
        self.alarm = AlarmBanner()
        self.param_label = NameLabel("no parameter selected", minimum=60)  # never widens the dock
        self.step_label = QLabel("")  # "step 401 of 1600" while the window is not live
        self.step_label.setStyleSheet(f"color: {SELECTION}; font-weight: bold")
        self.step_label.setToolTip("the step every view shows; End (or Live in the toolbar): newest")
        self.step_label.setMinimumWidth(60)  # may be cut: its appearing never widens the dock
        self.step_label.hide()
        self.log_box = QCheckBox("log counts")
        self.log_box.setToolTip("On: counts on a log scale. Off: linear counts, except a histogram "
                                "whose tallest bin holds a quarter of the values and 3× the next "
                                "(mostly exact zeros): log, "
                                "its axis marked 'auto'")
        self.log_box.toggled.connect(self.set_log)
        self.histogram = HistogramPlot()
        self.observed: dict = {}  # module -> ObservedGrads, from the session model
        self.observed_plot = HistogramPlot(title="observed grad_output[0] (filled), grad_input[0]")
        self.observed_plot.hide()  # shown while the selected module has an observe hook's data
        self.heatmap = HistogramHeatmap()
        self.heatmap.step_clicked.connect(lambda step: selection.select_step(step, "heatmap"))
        self.axis_box = QComboBox()  # the heat map's value axis
        self.axis_box.addItems(AXIS_MODES)
        for index, mode in enumerate(AXIS_MODES):
            self.axis_box.setItemData(index, AXIS_TIPS[mode], Qt.ToolTipRole)
        self.axis_box.setToolTip("value axis of the histogram over steps: fixed, each step on its "
                                 "own range, or log10 |g|")
        self.axis_box.currentTextChanged.connect(self.set_heatmap_axis)
        reads_whole(self.axis_box)
        self.flow_panel = FlowPanel()
        self.flow = self.flow_panel.chart
        self.flow.param_clicked.connect(
            lambda name: selection.select(param=name, module=name.rpartition(".")[0], source="flow"))
        header = QHBoxLayout()
        header.addWidget(self.param_label, 1)
        header.addWidget(self.step_label)  # the name has the rest: GPT-2's whole at 1024×700
        heatmap_box = QWidget()  # the heat map under its value-axis chooser (the header keeps its
        heat_column = QVBoxLayout(heatmap_box)  # width: the dock's least width is unchanged)
        heat_column.setContentsMargins(0, 0, 0, 0)
        heat_column.setSpacing(0)
        choosers = QHBoxLayout()  # between the two histograms "log counts" switches
        choosers.addWidget(self.log_box)
        choosers.addStretch(1)
        choosers.addWidget(self.axis_box)
        heat_column.addLayout(choosers)
        heat_column.addWidget(self.heatmap, 1)
        split = self.split = QSplitter(Qt.Vertical)
        for plot, least in zip((self.histogram, self.observed_plot, heatmap_box, self.flow_panel),
                               PLOT_HEIGHTS, strict=True):
            plot.setMinimumHeight(least)  # readable axes whatever the dock's size
            split.addWidget(plot)
        heatmap_box.setMinimumHeight(PLOT_HEIGHTS[2] + self.axis_box.sizeHint().height())  # its chooser too
        split.setChildrenCollapsible(False)
        for index, stretch in enumerate((2, 2, 2, 3)):  # the flow chart lists every parameter
            split.setStretchFactor(index, stretch)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.alarm)
        layout.addLayout(header)
        self.scroll = QScrollArea(widgetResizable=True, frameShape=QFrame.NoFrame)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.scroll.setWidget(split)
        bar = self.scroll.verticalScrollBar().sizeHint().width()
        self.scroll.setMinimumWidth(split.minimumSizeHint().width() + bar)  # scrolls, never clips
        layout.addWidget(self.scroll, 1)
        selection.changed.connect(self._selection_changed)

    def set_model(self, model) -> None:
        """A new model: pick its first parameter until the user selects another."""
        self.model = model
        first = next((n for n, _ in model.named_parameters()), None)
        self.param = parameter_for(self.selection.current, model) or first
        self.refresh()

    def show_observed(self, observed: dict) -> None:
        """What observe hooks saw last (module -> ObservedGrads); redraws the observed plot."""
        self.observed = observed
        self.refresh_observed()

    def refresh_observed(self) -> None:
        """The selected module's observed grad_output[0] and grad_input[0] histograms, if any."""
        module = self.selection.current.module
        seen = self.observed.get(module) if module is not None else None
        if seen is not None and self.observed_plot.isHidden():
            self._show_observed_plot()
        self.observed_plot.setVisible(seen is not None)
        if seen is not None:
            hists = seen.histograms
            self.observed_plot.show_histograms(module or "(model)", hists.get("grad_output.0"),
                                               hists.get("grad_input.0"), None)

    def _show_observed_plot(self) -> None:
        """Show the observed plot with as much room as the parameter histogram (a splitter
        gives a widget shown late only its minimum height)."""
        sizes = self.split.sizes()
        share = (sizes[0] + sizes[2]) // 3
        self.observed_plot.setVisible(True)
        self.split.setSizes([sizes[0] - share // 2 if sizes[0] > share else sizes[0], share,
                             sizes[2] - share // 2 if sizes[2] > share else sizes[2], sizes[3]])

    def set_log(self, log: bool) -> None:
        """Linear or logarithmic counts in the histogram and heat map."""
        self.histogram.set_log(log)
        self.observed_plot.set_log(log)
        self.heatmap.set_log(log)
        self.refresh()

    def _selection_changed(self, selection: Selection) -> None:
        self.refresh_observed()
        param = parameter_for(selection, self.model)
        if param and param != self.param:  # now: never another parameter's data under its name
            self.param = param
            self.refresh()
        elif selection.step != self._step:  # another step: its histogram, flow and marker
            self.refresh_histogram()
            self.refresh_flow()
            self.heatmap.mark_step(selection.step)

    def refresh(self) -> None:
        """Redraw every plot now."""
        self.refresh_histogram()
        self.refresh_heatmap()
        self.refresh_flow()
        self.refresh_observed()

    def flush(self) -> None:
        """Draw now what the throttles hold back (end of a run, screenshots)."""
        for throttle in self._throttles:
            throttle.flush()

    def refresh_histogram(self) -> None:
        """Redraw the alarm and the selected parameter's histogram at the selection's step (the
        newest histogram step at or before it), its step said when it is not the newest."""
        self._step = step = self.selection.current.step
        shown = self.timeline.gradients_at(step)
        newest = self.timeline.newest_step
        self.alarm.show_gradients(shown)
        name = self.param
        current, previous = self.timeline.histogram_records(name, step) if name else (None, None)
        drawn = current[0] if current is not None else shown  # the step the histogram is of
        stats = drawn.params.get(name) if drawn is not None and name else None
        self.param_label.set_name(self.param)
        caption = step_caption(shown.step if shown is not None else None, newest)
        self.step_label.setText(caption)
        self.step_label.setVisible(bool(caption))
        self.histogram.show_histograms(
            name, current and current[1], previous and previous[1], stats,
            step=drawn.step if drawn is not None else None,
            caption=step_caption(drawn.step if drawn is not None else None, newest))

    def set_heatmap_axis(self, mode: str) -> None:
        """The heat map's value axis: ``fixed``, ``per step`` or ``log |g|``."""
        self.axis_box.setCurrentText(mode)
        self.heatmap.set_axis_mode(mode)

    def set_run(self, run) -> None:
        """Draw the heat map over the whole of ``run`` (a followed run directory; None: the
        live session's history)."""
        self.run_history = None if run is None else RunHistory(run)
        self.refresh_heatmap()

    def refresh_heatmap(self) -> None:
        """Redraw the selected parameter's histogram over steps."""
        name, history = self.param, self.run_history
        if not name:
            matrix = None
        elif history is not None:
            matrix = history.histogram_matrix(name, thin_steps(history.histogram_steps(), HEATMAP_STEPS))
        else:
            matrix = self.timeline.gradients.histogram_matrix(name)
        self.heatmap.show_matrix(name, matrix)
        self.heatmap.mark_step(self.selection.current.step)

    def refresh_flow(self) -> None:
        """Redraw the gradient flow of the step shown (the newest while live)."""
        shown = self.timeline.gradients_at(self.selection.current.step)
        self.flow.show_stats(shown.params if shown is not None else {})
