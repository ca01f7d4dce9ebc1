"""Show a run directory in the main window and follow it as it grows (File → Open run)."""

from __future__ import annotations

from pathlib import Path

from gradexplorer.core.errors import UserError
from gradexplorer.core.recorder.run import open_run
from gradexplorer.core.recorder.structure import skeleton_model
from gradexplorer.gui.run_follower import RunFollower

HISTORY = 256  # steps of a run kept in the views


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


def show_run(window, path: str | Path) -> RunFollower | None:
    """Stop any training in ``window`` and show the run at ``path``, following it live."""
    run = None
    try:  # everything read before the window changes: a damaged run is a dialog, never a crash
        run = open_run(path)
        run.check()  # the newest step whole: a damaged older one is the follower's dialog
        structure = run.structure
        if not structure:
            raise UserError(f"run {str(path)!r} has no model structure yet")
        graph = recorded_graph(run)
        model = skeleton_model(structure)
    except UserError as exc:
        if run is not None:
            run.close()
        window.show_error(str(exc))
        return None
    close_run(window)
    window.controller.stop()
    window.setWindowTitle(f"gradexplorer — run {path}")
    window.tree.set_model(model)
    window.table.table.set_model(model)
    window.table.fit_columns()
    window.details.set_context(model=model, stats={}, hooks={})
    window.gradients.set_model(model)
    follower = RunFollower(run, window.controller.timeline, history=HISTORY, parent=window)
    window.run_follower = follower
    follower.failed.connect(window.show_error)
    window.distributions.set_run(run)  # bands over the whole run, not the history's window
    window.controller.session_opened.connect(lambda _live: close_run(window))
    follower.poll()
    if graph is not None:
        window.graph_panel.set_graph(graph, fit=True)
    window.settle()
    return follower


def close_run(window) -> None:
    """Stop following the run the window shows, if any."""
    follower = getattr(window, "run_follower", None)
    if follower is not None:
        window.distributions.set_run(None)
        follower.close()
        window.run_follower = None
