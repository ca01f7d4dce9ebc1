"""Wires the step ledger, spike markers and divergence into the main window (one call).

``install(window)`` adds the "Ledger", "Optimizer" and "Spikes" docks (tabbed with Training and
Events), the
spike markers on the training curves, and File → "Compare runs (divergence)…";
``show_divergence(window, a, b)`` opens run A and shows where run B parts from it.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QAction

from gradexplorer.core.errors import UserError
from gradexplorer.gui.panels.ledger_view import LedgerPanel
from gradexplorer.gui.panels.spike_view import SpikePanel
from gradexplorer.gui.plots.optimizer_curves import OptimizerCurves
from gradexplorer.gui.plots.spike_markers import SpikeMarkers
from gradexplorer.gui.throttle import throttled

ROOM = 0.36  # share of the window's height a ranking or ledger brought forward gets
OPTIMIZER_MS = 130  # the parameter table's optimizer columns, as often as its other figures


def install(window) -> None:
    """Add the ledger and spike views to ``window`` (a MainWindow, after its menus)."""
    window.ledger_panel = LedgerPanel(window.controller.timeline)
    window.spike_markers = SpikeMarkers(window.curves, window)
    window.spike_panel = SpikePanel(window)
    window.optimizer_curves = OptimizerCurves(window.selection, window.controller.timeline)
    window.ledger_dock = window._dock("Ledger", window.ledger_panel, Qt.BottomDockWidgetArea)
    window.optimizer_dock = window._dock("Optimizer", window.optimizer_curves, Qt.BottomDockWidgetArea)
    window.spikes_dock = window._dock("Spikes", window.spike_panel, Qt.BottomDockWidgetArea)
    window.optimizer_dock.visibilityChanged.connect(window.optimizer_curves.set_shown)
    for dock in (window.ledger_dock, window.optimizer_dock, window.spikes_dock):
        window.tabifyDockWidget(window.events_dock, dock)
    window.curves_dock.raise_()
    window.spike_markers.clicked.connect(lambda event: show_spike(window, event))
    table = window.table.table
    window.optimizer_columns_soon = throttled(
        lambda: table.set_optimizer_state(window.controller.timeline.ledger.optimizer_state),
        timeout=OPTIMIZER_MS, leading=False, parent=window)
    window.controller.timeline.changed.connect(window.optimizer_columns_soon)
    _add_actions(window)


def flush(window) -> None:
    """Draw now what the ledger, the spike markers and the optimizer columns hold back."""
    if hasattr(window, "ledger_panel"):  # flush_redraws may run before install
        for throttle in (window.ledger_panel.refresh_soon, window.spike_markers.refresh_soon,
                         window.optimizer_columns_soon, window.optimizer_curves.refresh_soon):
            throttle.flush()


def show_spike(window, event) -> None:
    """Open ``event`` (a SpikeEvent): its ranking, its step, the graph tinted by onset."""
    window.spike_panel.show_event(event)
    bring_forward(window, window.spikes_dock)


def show_divergence(window, path_a: str | Path, path_b: str | Path, tol: float | None = None):
    """Show run A (followed) and where run B parts from it; the Divergence, or None after a
    dialog (a damaged or unrelated run)."""
    from gradexplorer.core.recorder.divergence import DEFAULT_TOL, find_divergence
    from gradexplorer.gui.runs.run_view import show_run

    try:
        divergence = find_divergence(path_a, path_b, DEFAULT_TOL if tol is None else tol)
    except UserError as exc:
        window.show_error(str(exc))
        return None
    if show_run(window, path_a) is None:
        return None
    window.spike_panel.show_divergence(divergence, Path(path_a).name, Path(path_b).name)
    bring_forward(window, window.spikes_dock)
    return divergence


def bring_forward(window, dock) -> None:
    """Raise a bottom tab and give it room to read (ROOM of the window's height at least)."""
    dock.raise_()
    wanted = int(window.height() * ROOM)
    if dock.height() < wanted:  # after the window's own first sizing (its showEvent)
        QTimer.singleShot(0, lambda: window.resizeDocks([dock], [wanted], Qt.Vertical))


def ask_divergence(window) -> None:
    """Ask for two run folders and show where they part."""
    actions = window.file_actions
    first = actions._folder("Compare runs: run A (shown)")
    second = first and actions._folder("Compare runs: run B")
    if first and second:
        show_divergence(window, first, second)


def _add_actions(window) -> None:
    action = QAction("Compare runs (divergence)…", window)
    action.setToolTip("find the first step at which two run directories part, and which "
                      "parameters moved first there")
    action.triggered.connect(lambda: ask_divergence(window))
    menu_actions = window.file_menu.actions()
    after = next((i for i, a in enumerate(menu_actions) if a.text().startswith("Open run")), None)
    before = menu_actions[after + 1] if after is not None and after + 1 < len(menu_actions) else None
    window.file_menu.insertAction(before, action)
    window.compare_runs_action = action
    view = window.view_menu
    separator = next((a for a in view.actions() if a.isSeparator()), None)
    for dock in (window.ledger_dock, window.optimizer_dock, window.spikes_dock):
        view.insertAction(separator, dock.toggleViewAction())
    columns = QAction("Optimizer columns in the parameter table", window)
    columns.setCheckable(True)
    columns.setToolTip("lr, ‖m‖, RMS √v̂, effective lr and ‖momentum‖ of each parameter after the "
                       "newest step")
    columns.toggled.connect(window.table.show_optimizer_columns)
    view.insertAction(separator, columns)
    window.optimizer_columns_action = columns


def run_opener(spike: int | None = None, diverge: str | Path | None = None,
               tol: float | None = None, dock: str | None = None):
    """What ``gradexplorer open RUN`` does with ``--spike STEP``, ``--diverge OTHER`` and
    ``--dock NAME``: a ``show(window, path)`` for ``open_run_window``."""
    from gradexplorer.gui.runs.run_view import show_run

    def show(window, path) -> None:
        if diverge is not None:
            show_divergence(window, path, diverge, tol)
        elif show_run(window, path) is not None and spike is not None:
            event = next((e for e in window.controller.timeline.ledger.events()
                          if e.step == spike), None)
            if event is None:
                window.show_error(f"run {str(path)!r} has no spike event at step {spike}")
            else:
                show_spike(window, event)
        if dock is not None:
            bring_forward(window, getattr(window, f"{dock}_dock"))
        window.settle()
    return show
