"""The step ledger, spike markers and divergence in the main window.

``StepForensics`` (``MainWindow.forensics``, made with the plots) adds the "Ledger",
"Optimizer", "Spikes" and "Per-sample" docks (tabbed with Training and Events), the spike markers on the
training curves, and File → "Compare runs (divergence)…"; its ``show_divergence(a, b)`` opens
run A and shows where run B parts from it.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QAction

from gradexplorer.core.messages.errors import UserError
from gradexplorer.gui.panels.ledger_view import LedgerPanel
from gradexplorer.gui.panels.per_sample_view import PerSamplePanel
from gradexplorer.gui.panels.spike_view import SpikePanel
from gradexplorer.gui.plots.optimizer_curves import OptimizerCurves
from gradexplorer.gui.plots.spike_markers import SpikeMarkers
from gradexplorer.gui.throttle import throttled

ROOM = 0.36  # share of the window's height a ranking or ledger brought forward gets
OPTIMIZER_MS = 130  # the parameter table's optimizer columns, as often as its other figures


class StepForensics:
    """The ledger, spike and optimizer views of a main window and the commands that show them."""

    def __init__(self, window, curves, reference) -> None:
        """Add the views to ``window`` (a MainWindow, after its menus); ``curves``: its
        TrainingCurves, which the spike markers mark (every shown run's); ``reference``: the
        ReferenceFigures the ledger and the optimizer curves show."""
        self.window = window
        timeline = window.controller.timeline
        self.ledger_panel = LedgerPanel(reference)
        self.spike_markers = SpikeMarkers(curves, window)
        self.spike_panel = SpikePanel(window)
        self.optimizer_curves = OptimizerCurves(window.selection, reference)
        self.ledger_dock = window._dock("Ledger", self.ledger_panel, Qt.BottomDockWidgetArea)
        self.optimizer_dock = window._dock("Optimizer", self.optimizer_curves, Qt.BottomDockWidgetArea)
        self.spikes_dock = window._dock("Spikes", self.spike_panel, Qt.BottomDockWidgetArea)
        self.per_sample = PerSamplePanel.docked(window)  # per-sample gradient norms (issue 36)
        self.optimizer_dock.visibilityChanged.connect(self.optimizer_curves.set_shown)
        for dock in (self.ledger_dock, self.optimizer_dock, self.spikes_dock):
            window.tabifyDockWidget(window.events_dock, dock)
        window.curves_dock.raise_()
        self.spike_markers.clicked.connect(self.show_spike)
        selection = window.selection  # the ledger and the curves' line at the step shown
        selection.step_changed.connect(self.spike_markers.mark_step)
        selection.step_changed.connect(self.ledger_panel.show_step)
        for view in (curves, self.ledger_panel):  # a click on a point: the window at its step
            view.step_clicked.connect(lambda step, v=view: selection.select_step(
                step, "curves" if v is curves else "ledger"))
        self.ledger_panel.show_step(selection.current.step)
        table = window.table.table
        self.optimizer_columns_soon = throttled(
            lambda: table.set_optimizer_state(timeline.ledger.optimizer_state),
            timeout=OPTIMIZER_MS, leading=False, parent=window)  # the window's own run, as the
        timeline.changed.connect(self.optimizer_columns_soon)  # table's other figures
        self.compare_runs_action, self.optimizer_columns_action = self._add_actions()

    def flush(self) -> None:
        """Draw now what the ledger, the spike markers and the optimizer columns hold back."""
        for throttle in (self.ledger_panel.refresh_soon, self.spike_markers.refresh_soon,
                         self.optimizer_columns_soon, self.optimizer_curves.refresh_soon):
            throttle.flush()

    def show_spike(self, event) -> None:
        """Open ``event`` (a SpikeEvent): its ranking, its step, the graph tinted by onset."""
        self.spike_panel.show_event(event)
        self.bring_forward(self.spikes_dock)

    def show_divergence(self, path_a: str | Path, path_b: str | Path, tol: float | None = None):
        """Show run A (followed) and where run B parts from it; the Divergence, or None after a
        dialog (a damaged or unrelated run)."""
        from gradexplorer.core.runs.divergence import DEFAULT_TOL, find_divergence
        from gradexplorer.gui.runs.run_view import show_run

        window = self.window
        try:
            divergence = find_divergence(path_a, path_b, DEFAULT_TOL if tol is None else tol)
        except UserError as exc:
            window.show_error(str(exc))
            return None
        if show_run(window, path_a) is None:
            return None
        self.spike_panel.show_divergence(divergence, Path(path_a).name, Path(path_b).name)
        self.bring_forward(self.spikes_dock)
        return divergence

    def bring_forward(self, dock) -> None:
        """Raise a bottom tab and give it room to read (ROOM of the window's height at least)."""
        window = self.window
        dock.raise_()
        wanted = int(window.height() * ROOM)
        if dock.height() < wanted:  # after the window's own first sizing (its showEvent)
            QTimer.singleShot(0, lambda: window.resizeDocks([dock], [wanted], Qt.Vertical))

    def ask_divergence(self) -> None:
        """Ask for two run folders and show where they part."""
        actions = self.window.file_actions
        first = actions._folder("Compare runs: run A (shown)")
        second = first and actions._folder("Compare runs: run B")
        if first and second:
            self.show_divergence(first, second)

    def _add_actions(self) -> tuple[QAction, QAction]:
        window, menus = self.window, self.window.menus
        action = QAction("Compare runs (divergence)…", window)
        action.setToolTip("find the first step at which two run directories part, and which "
                          "parameters moved first there")
        action.triggered.connect(self.ask_divergence)
        menus.add_file_action(action, menus.file_action_named("Open run"))
        for dock in (self.ledger_dock, self.optimizer_dock, self.spikes_dock):
            menus.add_view_action(dock.toggleViewAction())
        columns = QAction("Optimizer columns in the parameter table", window)
        columns.setCheckable(True)
        columns.setToolTip("lr, ‖m‖, RMS √v̂, effective lr and ‖momentum‖ of each parameter after "
                           "the newest step")
        columns.toggled.connect(window.table.show_optimizer_columns)
        menus.add_view_action(columns)
        return action, columns


def run_opener(spike: int | None = None, diverge: str | Path | None = None,
               tol: float | None = None, dock: str | None = None):
    """What ``gradexplorer open RUN`` does with ``--spike STEP``, ``--diverge OTHER`` and
    ``--dock NAME``: a ``show(window, path)`` for ``open_run_window``."""
    from gradexplorer.gui.runs.run_view import show_run

    def show(window, path) -> None:
        if diverge is not None:
            window.forensics.show_divergence(path, diverge, tol)
        elif show_run(window, path) is not None and spike is not None:
            event = next((e for e in window.controller.timeline.ledger.events()
                          if e.step == spike), None)
            if event is None:
                window.show_error(f"run {str(path)!r} has no spike event at step {spike}")
            else:
                window.forensics.show_spike(event)
        if dock is not None:
            window.forensics.bring_forward(window.dock_named(dock))
        window.settle()
    return show
