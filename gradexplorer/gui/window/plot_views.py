"""The main window's pyqtgraph views and the runs overlay, made into their docks
(``MainWindow.build_plots``): the one place the window's start imports pyqtgraph and the run
code (which imports torch), once the first graph is drawn."""

from __future__ import annotations

from typing import NamedTuple

from gradexplorer.gui.models.reference_run import ReferenceFigures
from gradexplorer.gui.models.run_overlay import RunOverlay, TimelineSource
from gradexplorer.gui.plots.curves import TrainingCurves
from gradexplorer.gui.plots.distributions_dock import DistributionsPanel
from gradexplorer.gui.plots.gradient_panel import GradientPanel
from gradexplorer.gui.runs.run_compare import RunCompare
from gradexplorer.gui.theme import configure_plots, current_theme
from gradexplorer.gui.window.step_forensics import StepForensics


class PlotViews(NamedTuple):
    """The Gradients, Distributions and Training docks' views, the runs they overlay, and what
    is made with them: the ledger and spike views, the Runs dock."""

    gradients: GradientPanel
    distributions: DistributionsPanel
    curves: TrainingCurves
    overlay: RunOverlay
    reference: ReferenceFigures  # the figures the Ledger, Optimizer and tiles show
    forensics: StepForensics
    compare: RunCompare

    def flush(self) -> None:
        """Draw now what the plots, ledger, spike markers and optimizer columns hold back."""
        self.gradients.flush()
        self.distributions.flush()
        self.forensics.flush()


def make_plot_views(window) -> PlotViews:
    """Make ``window``'s plots, each put in its dock, the ledger, spike markers, divergence and
    the Runs dock, then the saved layout restored over the docks just made (``window`` keeps
    the PlotViews returned: ``MainWindow.build_plots``)."""
    configure_plots(current_theme())  # pyqtgraph's defaults in the app's theme
    timeline = window.controller.timeline
    overlay = RunOverlay(TimelineSource(timeline))  # runs compared (run_compare)
    reference = ReferenceFigures(timeline, overlay)  # the reference run's
    gradients = GradientPanel(window.selection, timeline)
    distributions = DistributionsPanel(window.selection, timeline, overlay=overlay, figures=reference)
    curves = TrainingCurves(timeline, overlay=overlay)
    curves.setMinimumHeight(130)  # axes stay readable
    for dock, view in zip((window.gradients_dock, window.distributions_dock, window.curves_dock),
                          (gradients, distributions, curves), strict=True):
        placeholder = dock.widget()
        dock.setWidget(view)
        if placeholder is not None:
            placeholder.deleteLater()
    title = window.curves_dock.minimumSizeHint().height() - curves.minimumSizeHint().height()
    window.dock_shares.set_least(window.curves_dock, curves.comfortable_height() + title)
    views = PlotViews(gradients, distributions, curves, overlay, reference,
                      StepForensics(window, curves, reference),  # ledger, spike markers, divergence
                      RunCompare(window, overlay, gradients))  # File → Add run to compare…, Runs dock
    live = window.controller.session.live
    if live is not None and not window.shown_run.showing:  # opened before the plots were made
        overlay.set_own(TimelineSource(timeline), f"live: {live.spec}")
        gradients.set_model(live.session.model)
        if window.controller.session.observed:
            gradients.show_observed(window.controller.session.observed)
    state = window.settings.window_state()
    if window.isVisible() and state is not None:
        window.restoreState(state)  # where the saved layout put the docks just made
    elif window.isVisible():  # a first start: the shares again, with the plots' real least sizes
        window.dock_shares.apply()
    if window.startup_clock is not None:  # bench/cold_start.py: when the plots came
        window.startup_clock.plots_made()
    return views
