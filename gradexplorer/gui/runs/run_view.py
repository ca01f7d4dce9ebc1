"""Show a run directory in the main window and follow it as it grows (File → Open run).

While a run is shown the window is a run view: the model session stays open but idle and
cannot train (its controls are disabled), every view is cleared of the model's selection,
graph and figures, and the title and status bar name the run. A folder that no writer has
created yet is waited for, as TensorBoard waits on an empty log folder. Everything a run view
shows first is read before the window changes: a damaged run is a dialog, never a crash.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QTimer

from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.runs.run import open_run
from gradexplorer.core.runs.schema import database_path
from gradexplorer.core.runs.structure import skeleton_model
from gradexplorer.gui.runs.run_follower import RunFollower

HISTORY = 256  # steps of a run kept in the views
WAIT_MS = 500  # how often a run that does not exist yet is looked for


def recorded_graph(run):
    """The backward graph the run stored (networkx), or None; a damaged one is a UserError."""
    data = run.graph
    if not data:
        return None
    import networkx as nx

    graph = nx.node_link_graph(data, edges="edges")
    for _, attrs in graph.nodes(data=True):
        if isinstance(attrs.get("shape"), list):
            attrs["shape"] = tuple(attrs["shape"])
        attrs.setdefault("saved", {})
    return graph


def run_is_ready(path: Path):
    """``(run, model)`` once the run's writer has created it and stored the model structure,
    None before that; the newest step and the graph's data read whole (``Run.check``): a
    damaged run is a UserError here."""
    if not database_path(path).is_file():
        return None
    run = open_run(path)
    try:
        if not run.structure:
            run.close()
            return None
        run.check()  # the newest steps whole: a damaged older one is the follower's dialog
        return run, skeleton_model(run.structure)
    except BaseException:
        run.close()
        raise


def show_run(window, path: str | Path) -> RunFollower | None:
    """Stop any training in ``window`` and show the run at ``path``, following it live.

    Returns the follower, or None while waiting for the run to be written (it is shown as
    soon as it is) or when it cannot be read (an error dialog says why; the window is left
    as it was).
    """
    path = Path(path)
    try:
        ready = run_is_ready(path)
    except UserError as exc:
        window.show_error(str(exc))
        return None
    close_run(window)
    enter_run_view(window, path)
    if ready is None:
        window.status.show_run(path.name, "waiting for its writer…")
        window.shown_run.wait(RunWaiter(window, path))
        return None
    return _follow(window, *ready)


def enter_run_view(window, path: Path) -> None:
    """The window shows a run: training stops and cannot start, the model's views are cleared."""
    window.controller.stop()
    window.shown_run.enter(path)
    window.run_controls.set_run_view(True)
    window.selection.clear()
    window.graph_panel.clear()
    window.setWindowTitle(f"gradexplorer — run {path.name} ({path})")
    window.status.reset()
    clear_model_views(window)  # an empty folder waited for showed the last model's figures
    window.status.show_run(path.name, "following")
    window.events.add(f"showing run {path} (the model's training controls are off until a "
                      "model is opened)")


def clear_model_views(window) -> None:
    """No module, parameter, curve or figure of what was shown before (the run fills them)."""
    from torch import nn

    from gradexplorer.core.stats.history import GradientHistory

    empty = nn.Module()
    window.tree.clear_model()
    window.table.table.set_model(empty)
    window.details.reset(empty)
    window.gradients.set_model(empty)
    window.controller.timeline.reset(GradientHistory(1))


def _follow(window, run, model) -> RunFollower:
    window.tree.set_model(model)
    window.table.table.set_model(model)
    window.table.fit_columns()
    window.details.set_context(model=model, stats={}, hooks={})
    window.gradients.set_model(model)
    follower = RunFollower(run, window.controller.timeline, history=HISTORY, parent=window)
    window.shown_run.follow(follower)
    follower.failed.connect(window.show_error)
    follower.finished.connect(lambda step: window.status.show_run(
        run.path.name, f"finished at step {step}" if step is not None else "finished"))
    follower.stopped.connect(lambda step: window.status.show_run(  # killed, crashed: no lock held
        run.path.name, f"writer stopped at step {step}" if step is not None else "writer stopped"))
    window.distributions.set_run(run)  # bands over the whole run, not the history's window
    window.gradients.set_run(run)  # and the heat map
    window.run_compare.follow_own_run(run)  # the overlay's own run (run_compare)
    follower.poll()
    follower.start()  # the next polls on a thread of its own
    window.settle()
    window.repaint()  # the figures painted first: the graph's layout thread contends for the GIL
    QTimer.singleShot(0, window, lambda: _show_graph(window, follower))
    return follower


def _show_graph(window, follower: RunFollower) -> None:
    """The backward graph the followed run recorded, laid out (unless another run is shown)."""
    if not window.shown_run.is_followed_by(follower):
        return
    graph = recorded_graph(follower.run)  # its data was read and checked by run_is_ready
    if graph is not None:
        window.graph_panel.set_graph(graph, fit=True)


class RunWaiter:
    """Looks for a run's database every ``WAIT_MS`` and shows the run once it exists."""

    def __init__(self, window, path: Path) -> None:
        self.window, self.path = window, path
        self.timer = QTimer(window, interval=WAIT_MS)
        self.timer.timeout.connect(self.look)
        self.timer.start()

    def look(self) -> None:
        try:
            ready = run_is_ready(self.path)
        except UserError as exc:
            self.stop()
            self.window.show_error(str(exc))
            return
        if ready is not None:
            self.stop()
            self.window.status.show_run(self.path.name, "following")
            _follow(self.window, *ready)

    def stop(self) -> None:
        self.timer.stop()


def close_run(window) -> None:
    """Stop following (or waiting for) the run the window shows, if any."""
    if window.shown_run.follower is not None:
        window.distributions.set_run(None)
        window.gradients.set_run(None)
        window.run_compare.forget_own_run()
    window.shown_run.stop()  # the follower closed, the waiter stopped


def leave_run_view(window) -> None:
    """A model was opened (``MainWindow._session_opened``): stop showing the run, training
    controls back on."""
    close_run(window)
    if window.shown_run.leave():
        window.run_controls.set_run_view(False)
