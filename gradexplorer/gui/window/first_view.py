"""What the window shows while a model opens at the app's start: the first graph, traced on the
training thread as soon as the model is built, and placeholders in the plot docks until the
plots are made (``MainWindow.build_plots``). docs/architecture.md: the start's thread rule."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtWidgets import QLabel

from gradexplorer.gui.models.session import GraphTraced


class AfterFirstPaint(QObject):
    """Calls ``then()`` once, right after ``widget`` has painted a frame while ``ready()`` holds
    (or after ``latest_ms``, should it never paint, e.g. minimised): the app opens its model
    once the window is on screen, and makes its plots once the first graph is."""

    def __init__(self, widget, then: Callable[[], object], ready: Callable[[], bool] = lambda: True,
                 latest_ms: int | None = None) -> None:
        super().__init__(widget)
        self.widget, self.then, self.ready = widget, then, ready
        widget.installEventFilter(self)
        if latest_ms is not None:
            QTimer.singleShot(latest_ms, self, self.fire)

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt API
        if obj is self.widget and event.type() == QEvent.Paint and self.ready():
            QTimer.singleShot(0, self, self.fire)  # after the frame is on screen
        return False

    def fire(self) -> None:
        if self.then is not None:
            then, self.then = self.then, None
            self.widget.removeEventFilter(self)
            then()


def plots_soon() -> QLabel:
    """What a plot dock shows until its plots are made (``MainWindow.build_plots``)."""
    return QLabel("loading…", alignment=Qt.AlignCenter, enabled=False)


def traced(session, choice: tuple[bool, int], fit: bool, first: bool = False) -> GraphTraced:
    """The session's graph (on the training thread, which imports the graph code and torch);
    ``choice``: the view's ``trace_choice``, (trace gradients, which micro-batch)."""
    from gradexplorer.gui.graph.core_api import traced_graph

    return GraphTraced(traced_graph(session, *choice), fit, first)


def leave_start(window, close: Callable[[], object]) -> None:
    """The window closed while the app's first model opens (``app.launch``; no model open, so
    nothing to lose): the training thread is told to stop, not waited for, the window closes
    (``close``) and the process ends now (``app.end_process_now``: settings written, output
    flushed), not after torch's import or the model's build, nor a collection of their objects."""
    from gradexplorer.gui.app import end_process_now
    from gradexplorer.gui.gui_thread_gc import collect_on_gui_thread

    collect_on_gui_thread().hold()
    window.controller.close(wait=False)
    for other in window.file_actions.snapshot_windows:
        other.close()
    close()
    end_process_now(0 if window.exit_status is None else window.exit_status, window.settings)
