"""Many runs in the main window: File → "Add run to compare…", the "Runs" dock (selector and
the selected parameter's figure over every run), and what follows the overlay: the window's
own run named in it, the reference run's heat map in the Gradients dock, added runs that are
still being written redrawn as they grow (``RunCompare``: ``MainWindow.run_compare``, made with
the plots)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, QTimer

from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.runs.history import RunHistory
from gradexplorer.core.runs.run import open_run
from gradexplorer.gui.models.run_overlay import HistorySource, TimelineSource
from gradexplorer.gui.runs.runs_panel import RunsPanel
from gradexplorer.gui.window.run_controls import make_action

GROWTH_MS = 2000  # how often added runs are asked whether their writer added steps
SPLIT_LEAST = 880  # a window shorter than this (pixels) shows the Runs dock as a tab beside the
# Model dock: split below it, at 1024×700, its plot was squeezed to a few pixels


class RunCompare:
    """The Runs dock (hidden until a run is added), File → "Add run to compare…", and the
    runs added to a main window's overlay."""

    def __init__(self, window, overlay, gradients) -> None:
        """``overlay``: the window's RunOverlay; ``gradients``: its GradientPanel (the heat map
        of the reference run)."""
        self.window, self.overlay, self.gradients = window, overlay, gradients
        self.runs_panel = RunsPanel(overlay, window.selection, window.controller.timeline)
        self.runs_panel.default_param = lambda: gradients.param  # what the Gradients dock shows
        self.runs_dock = window._dock("Runs", self.runs_panel, Qt.LeftDockWidgetArea)
        window.splitDockWidget(window.model_dock, self.runs_dock, Qt.Vertical)
        self.runs_dock.hide()
        window.menus.add_view_action(self.runs_dock.toggleViewAction(), first=True)
        self.runs_panel.selector.add_requested.connect(self.ask_compare_run)
        self.add_run_action = make_action(window, "Add run to compare…", "compare", None,
                                          self.ask_compare_run)
        self.add_run_action.setToolTip("overlay another run directory on this run or session: curves, "
                                       "bands and the selected parameter's figures in its colour")
        window.menus.add_file_action(self.add_run_action, window.file_actions.run_action)
        overlay.changed.connect(self.show_reference_heatmap)
        window.controller.session.opened.connect(
            lambda live: overlay.set_own(TimelineSource(window.controller.timeline), f"live: {live.spec}"))
        self.run_growth = QTimer(window, interval=GROWTH_MS)  # runs while runs are added
        self.run_growth.timeout.connect(self.notice_growth)
        self._seen_last: dict[int, int] = {}  # each added run's last step when last asked (by id)

    def follow_own_run(self, run) -> None:
        """The window now follows ``run``: it is the overlay's own run (read whole)."""
        self.overlay.set_own(TimelineSource(self.window.controller.timeline, RunHistory(run)),
                             run.path.name, run.path)

    def forget_own_run(self) -> None:
        """The followed run closes: the overlay's own run is the (idle) session's timeline again."""
        self.overlay.set_own(TimelineSource(self.window.controller.timeline), "live session")

    def ask_compare_run(self) -> None:
        folder = self.window.file_actions._folder("Add run to compare")
        if folder:
            self.add_run(folder)

    def add_run(self, path: str | Path):
        """Overlay the run directory at ``path``; None (and a dialog) when it cannot be read."""
        path = Path(path)
        try:
            run = open_run(path)
        except UserError as exc:
            self.window.show_error(str(exc))
            return None
        try:
            run.check()
        except UserError as exc:
            run.close()
            self.window.show_error(str(exc))
            return None
        names = {r.name for r in self.overlay.runs}
        name = path.name if path.name not in names else f"{path.parent.name}/{path.name}"
        added = self.overlay.add(HistorySource(RunHistory(run)), name, path)
        self.run_growth.start()
        if not self.runs_dock.isVisible():
            self.place_runs_dock()
        self.runs_dock.show()
        self.runs_dock.raise_()
        return added

    def place_runs_dock(self) -> None:
        """Below the Model dock where the window is tall enough for both, else a tab beside it."""
        window = self.window
        if window.dockWidgetArea(self.runs_dock) != window.dockWidgetArea(window.model_dock):
            return  # the user moved it: it stays where they put it
        if window.height() < SPLIT_LEAST:
            window.tabifyDockWidget(window.model_dock, self.runs_dock)
        else:  # its plot gets 120+ pixels (at 1600×1000 it had 85 under the selector)
            window.splitDockWidget(window.model_dock, self.runs_dock, Qt.Vertical)
            height = window.model_dock.height() + self.runs_dock.height()
            window.resizeDocks([window.model_dock, self.runs_dock],
                               [height // 2, height - height // 2], Qt.Vertical)

    def show_reference_heatmap(self) -> None:
        """The Gradients dock's heat map shows the reference run (the window's own by default)."""
        overlay = self.overlay
        source = overlay.runs[overlay.reference].source
        history = source.history if isinstance(source, (HistorySource, TimelineSource)) else None
        if history is not self.gradients.run_history:
            self.gradients.run_history = history
            self.gradients.refresh_heatmap()

    def notice_growth(self) -> None:
        """Redraw when a run added to the overlay has grown (its writer is still at work)."""
        if not self.overlay.overlaid or not self.window.isVisible():  # none added, or window closed
            self.run_growth.stop()
            return
        grown = False
        for run in self.overlay.runs[1:]:
            if isinstance(run.source, HistorySource):
                try:
                    last = run.source.run.last_step
                except UserError:
                    continue
                grown |= self._seen_last.get(id(run), last) != last
                self._seen_last[id(run)] = last
        shown = {id(run) for run in self.overlay.runs}
        self._seen_last = {key: last for key, last in self._seen_last.items() if key in shown}
        if grown:
            self.overlay.changed.emit()


def overlay_opener(show, more=(), x_axis: str | None = None, heatmap_axis: str | None = None,
                   select: str | None = None, reference: int | None = None):
    """``gradexplorer open RUN1 RUN2 …``: a ``show(window, path)`` for ``open_run_window`` that
    shows the first run with ``show``, overlays the others (the Distributions tab in front: every
    run's bands), and sets the axes, the selected
    parameter and the reference run (numbered from 1)."""

    def opened(window, path) -> None:
        show(window, path)
        for other in more:
            window.run_compare.add_run(other)
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
        window.run_compare.runs_panel.refresh()
    return opened
