"""The main window's pyqtgraph views and the runs overlay, made into their docks
(``MainWindow.build_plots``): the one place the window's start imports pyqtgraph and the run
code (which imports torch), once the first graph is drawn."""

from __future__ import annotations

from typing import NamedTuple

from gradexplorer.gui.models.run_overlay import RunOverlay, TimelineSource
from gradexplorer.gui.plots.curves import TrainingCurves
from gradexplorer.gui.plots.distributions_dock import DistributionsPanel
from gradexplorer.gui.plots.gradient_panel import GradientPanel
from gradexplorer.gui.runs.run_compare import install as install_run_compare
from gradexplorer.gui.theme import configure_plots, current_theme
from gradexplorer.gui.window.step_forensics import flush as flush_step_forensics
from gradexplorer.gui.window.step_forensics import install as install_step_forensics


class PlotViews(NamedTuple):
    """The Gradients, Distributions and Training docks' views, and the runs they overlay."""

    gradients: GradientPanel
    distributions: DistributionsPanel
    curves: TrainingCurves
    overlay: RunOverlay


def make_plot_views(window) -> PlotViews:
    """Make ``window``'s plots, each put in its dock (``window._plots`` set before the ledger,
    spike markers, divergence and the Runs dock are added, which read them), then the saved
    layout restored over the docks just made."""
    configure_plots(current_theme())  # pyqtgraph's defaults in the app's theme
    timeline = window.controller.timeline
    overlay = RunOverlay(TimelineSource(timeline))  # runs compared (run_compare)
    views = PlotViews(GradientPanel(window.selection, timeline),
                      DistributionsPanel(window.selection, timeline, overlay=overlay),
                      TrainingCurves(timeline, overlay=overlay), overlay)
    views.curves.setMinimumHeight(130)  # axes stay readable
    for dock, view in zip((window.gradients_dock, window.distributions_dock, window.curves_dock),
                          views[:3], strict=True):
        placeholder = dock.widget()
        dock.setWidget(view)
        if placeholder is not None:
            placeholder.deleteLater()
    window._plots = views
    install_step_forensics(window)  # ledger, spike markers and divergence
    install_run_compare(window)  # runs overlaid: File → Add run to compare…, the Runs dock
    live = window.controller.live
    if live is not None and not window.shown_run.showing:  # opened before the plots were made
        overlay.set_own(TimelineSource(timeline), f"live: {live.spec}")
    state = window.settings.window_state()
    if window.isVisible() and state is not None:
        window.restoreState(state)  # where the saved layout put the docks just made
    return views


def flush_plots(window) -> None:
    """Draw now what ``window``'s plots, ledger, spike markers and optimizer columns hold back."""
    window.gradients.flush()
    window.distributions.flush()
    flush_step_forensics(window)
