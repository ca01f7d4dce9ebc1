"""Show a run directory in the main window and follow it as it grows (File → Open run)."""

from __future__ import annotations

from pathlib import Path

from gradexplorer.core.errors import UserError
from gradexplorer.core.recorder.run import open_run
from gradexplorer.core.recorder.structure import skeleton_model
from gradexplorer.gui.run_follower import RunFollower


def recorded_graph(run):
    """The backward graph the run stored (networkx), or None."""
    data = run.meta("graph")
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
    try:
        run = open_run(path)
        structure = run.structure
        if not structure:
            raise UserError(f"run {str(path)!r} has no model structure yet")
    except UserError as exc:
        window.show_error(str(exc))
        return None
    close_run(window)
    window.controller.stop()
    model = skeleton_model(structure)
    window.setWindowTitle(f"gradexplorer — run {path}")
    window.tree.set_model(model)
    window.table.table.set_model(model)
    window.table.fit_columns()
    window.details.set_context(model=model, stats={}, hooks={})
    window.gradients.set_model(model)
    follower = RunFollower(run, window.controller.timeline, parent=window)
    window.run_follower = follower
    window.distributions.set_run(run)  # bands over the whole run, not the history's window
    window.controller.session_opened.connect(lambda _live: close_run(window))
    follower.poll()
    graph = recorded_graph(run)
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
