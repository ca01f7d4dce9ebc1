"""What the window shows while a model opens at the app's start: the first graph, traced on the
training thread as soon as the model is built, and placeholders in the plot docks until the
plots are made (``MainWindow.build_plots``). docs/architecture.md: the start's thread rule."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel

from gradexplorer.gui.models.session import GraphTraced


def plots_soon() -> QLabel:
    """What a plot dock shows until its plots are made (``MainWindow.build_plots``)."""
    return QLabel("loading…", alignment=Qt.AlignCenter, enabled=False)


def traced(session, grads: bool, fit: bool, first: bool = False) -> GraphTraced:
    """The session's graph (on the training thread, which imports the graph code and torch)."""
    from gradexplorer.gui.graph.core_api import traced_graph

    return GraphTraced(traced_graph(session, grads), fit, first)
