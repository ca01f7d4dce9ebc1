"""Many runs in the main window: File → "Add run to compare…", the "Runs" dock (selector and
the selected parameter's figure over every run), and what follows the overlay: the window's
own run named in it, the reference run's heat map in the Gradients dock, added runs that are
still being written redrawn as they grow."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, QTimer

from gradexplorer.core.errors import UserError
from gradexplorer.core.recorder.run import open_run
from gradexplorer.core.recorder.run_history import RunHistory
from gradexplorer.gui.models.run_overlay import HistorySource, TimelineSource
from gradexplorer.gui.runs.runs_panel import RunsPanel
from gradexplorer.gui.window.run_controls import make_action

GROWTH_MS = 2000  # how often added runs are asked whether their writer added steps


def install(window) -> None:
    """Add the Runs dock (hidden until a run is added) and the File menu entry."""
    window.runs_panel = RunsPanel(window.overlay, window.selection, window.controller.timeline)
    window.runs_dock = window._dock("Runs", window.runs_panel, Qt.LeftDockWidgetArea)
    window.splitDockWidget(window.model_dock, window.runs_dock, Qt.Vertical)
    window.runs_dock.hide()
    window.view_menu.insertAction(window.view_menu.actions()[0], window.runs_dock.toggleViewAction())
    window.runs_panel.selector.add_requested.connect(lambda: ask_compare_run(window))
    window.add_run_action = make_action(window, "Add run to compare…", "compare", None,
                                        lambda: ask_compare_run(window))
    window.add_run_action.setToolTip("overlay another run directory on this run or session: curves, "
                                     "bands and the selected parameter's figures in its colour")
    actions = window.file_menu.actions()
    after = actions.index(window.file_actions.run_action) + 1
    window.file_menu.insertAction(actions[after] if after < len(actions) else None, window.add_run_action)
    window.overlay.changed.connect(lambda: show_reference_heatmap(window))
    window.controller.session_opened.connect(
        lambda live: window.overlay.set_own(TimelineSource(window.controller.timeline),
                                            f"live: {live.spec}"))
    window.run_growth = QTimer(window, interval=GROWTH_MS)  # runs while runs are added
    window.run_growth.timeout.connect(lambda: notice_growth(window))


def follow_own_run(window, run) -> None:
    """The window now follows ``run``: it is the overlay's own run (read whole)."""
    window.overlay.set_own(TimelineSource(window.controller.timeline, RunHistory(run)),
                           run.path.name, run.path)


def forget_own_run(window) -> None:
    """The followed run closes: the overlay's own run is the (idle) session's timeline again."""
    window.overlay.set_own(TimelineSource(window.controller.timeline), "live session")


def ask_compare_run(window) -> None:
    folder = window.file_actions._folder("Add run to compare")
    if folder:
        add_compare_run(window, folder)


def add_compare_run(window, path: str | Path):
    """Overlay the run directory at ``path``; None (and a dialog) when it cannot be read."""
    path = Path(path)
    try:
        run = open_run(path)
    except UserError as exc:
        window.show_error(str(exc))
        return None
    try:
        run.check()
    except UserError as exc:
        run.close()
        window.show_error(str(exc))
        return None
    names = {r.name for r in window.overlay.runs}
    name = path.name if path.name not in names else f"{path.parent.name}/{path.name}"
    added = window.overlay.add(HistorySource(RunHistory(run)), name, path)
    window.run_growth.start()
    window.runs_dock.show()
    window.runs_dock.raise_()
    return added


def show_reference_heatmap(window) -> None:
    """The Gradients dock's heat map shows the reference run (the window's own by default)."""
    overlay = window.overlay
    source = overlay.runs[overlay.reference].source
    history = source.history if isinstance(source, (HistorySource, TimelineSource)) else None
    if history is not window.gradients.run_history:
        window.gradients.run_history = history
        window.gradients.refresh_heatmap()


def notice_growth(window) -> None:
    """Redraw when a run added to the overlay has grown (its writer is still at work)."""
    if not window.overlay.overlaid or not window.isVisible():  # none added, or the window closed
        window.run_growth.stop()
        return
    grown = False
    for run in window.overlay.runs[1:]:
        if isinstance(run.source, HistorySource):
            try:
                last = run.source.run.last_step
            except UserError:
                continue
            grown |= getattr(run, "seen_last", last) != last
            run.seen_last = last
    if grown:
        window.overlay.changed.emit()


def overlay_opener(show, more=(), x_axis: str | None = None, heatmap_axis: str | None = None,
                   select: str | None = None, reference: int | None = None):
    """``gradexplorer open RUN1 RUN2 …``: a ``show(window, path)`` for ``open_run_window`` that
    shows the first run with ``show``, overlays the others (the Distributions tab in front: every
    run's bands), and sets the axes, the selected
    parameter and the reference run (numbered from 1)."""

    def opened(window, path) -> None:
        show(window, path)
        for other in more:
            add_compare_run(window, other)
        if more:
            window.distributions_dock.raise_()  # every run's bands
        if x_axis:
            window.overlay.set_x_mode(x_axis)
        if heatmap_axis:
            window.gradients.set_heatmap_axis(heatmap_axis)
        if select:
            window.selection.select(param=select, module=select.rpartition(".")[0], source="startup")
        if reference:
            window.overlay.set_reference(reference - 1)
        window.settle()
        window.runs_panel.refresh()
    return opened
