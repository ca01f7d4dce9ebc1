"""Collapsing and laying out graphs off the GUI thread; a newer request supersedes older ones."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal

from gradexplorer.core.graph.deep_stack import stack_that_starts
from gradexplorer.gui.graph.canvas import overview_scale
from gradexplorer.gui.graph.drawing import GraphDrawing
from gradexplorer.gui.graph.painting import base_fills, render_overview
from gradexplorer.gui.session.session_worker import describe_failure


@dataclass
class LaidOut:
    """A finished layout: drawing data and its overview image (None for small graphs)."""

    drawing: GraphDrawing
    overview: Any
    scale: float
    seconds: float


class _Task(QRunnable):
    def __init__(self, fn: Callable[[], Any], done: Callable[[Any], None],
                 failed: Callable[[str], None]) -> None:
        super().__init__()
        self.fn, self.done, self.failed = fn, done, failed

    def run(self) -> None:  # noqa: D102
        try:
            result = self.fn()
        except Exception as exc:  # noqa: BLE001 - reported in the GUI
            traceback.print_exception(exc, file=sys.stderr)
            report, value = self.failed, describe_failure(exc)
        else:
            report, value = self.done, result
        try:
            report(value)
        except RuntimeError:  # the queue was deleted meanwhile (the window closed): nobody to tell
            pass


class BackgroundQueue(QObject):
    """Runs one function at a time on its own thread; only the newest waiting request is kept.

    ``finished``/``failed`` are emitted on the GUI thread, and ``busy`` turns False only after
    their slots have run: whoever waits for "not busy" sees the result already shown (the
    worker's signal is one queued event, so no other event can come between the two).
    """

    finished = Signal(int, object)  # request number, result
    failed = Signal(int, str)
    busy_changed = Signal(bool)
    _done = Signal(int, object)  # from the worker thread: queued to this object's (GUI) thread
    _broke = Signal(int, str)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._pool = QThreadPool(self)
        self._pool.setMaxThreadCount(1)
        self._pending: tuple[int, Callable[[], Any]] | None = None
        self._running = False
        self._number = 0
        self._done.connect(self._deliver)
        self._broke.connect(self._deliver_failure)

    def _deliver(self, number: int, result: Any) -> None:
        try:
            self.finished.emit(number, result)
        finally:
            self._next()

    def _deliver_failure(self, number: int, text: str) -> None:
        try:
            self.failed.emit(number, text)
        finally:
            self._next()

    @property
    def busy(self) -> bool:
        """Whether a request is running or waiting."""
        return self._running or self._pending is not None

    def request(self, fn: Callable[[], Any]) -> int:
        """Queue ``fn``; returns its number (results of older numbers may be dropped)."""
        self._number += 1
        self._pending = (self._number, fn)
        if not self._running:
            self._start()
        return self._number

    def cancel(self) -> None:
        """Drop the waiting request; a running one finishes but its result counts as stale."""
        self._number += 1
        if self._pending is not None:
            self._pending = None
            if not self._running:
                self.busy_changed.emit(False)

    @property
    def latest(self) -> int:
        """The number of the newest request."""
        return self._number

    def _start(self) -> None:
        number, fn = self._pending
        self._pending = None
        self._running = True
        self.busy_changed.emit(True)
        task = _Task(fn, lambda r: self._done.emit(number, r), lambda m: self._broke.emit(number, m))
        # a pool whose thread cannot be created waits for it forever: ask for a stack that starts
        stack = stack_that_starts()
        if stack is None:  # no thread at all (an address-space or process limit): on this one
            print("gradexplorer: cannot start a thread (ulimit -v / -u?); laying out on the GUI "
                  "thread", file=sys.stderr)
            task.run()
            return
        self._pool.setStackSize(stack)  # for the thread it creates next (an idle one is reused)
        self._pool.start(task)

    def _next(self) -> None:
        self._running = False
        if self._pending is not None:
            self._start()
        else:
            self.busy_changed.emit(False)

    def wait(self, msecs: int = 30_000) -> bool:
        """Block until idle (tests and shutdown)."""
        return self._pool.waitForDone(msecs)


def lay_out(graph, layout: str, layout_fn, collapse: Callable | None = None) -> LaidOut:
    """Collapse (optionally), lay out, build drawing data and overview: the whole off-thread job."""
    import time

    start = time.perf_counter()
    shown = collapse(graph) if collapse is not None else graph
    pos = layout_fn(shown, layout)
    drawing = GraphDrawing(shown, pos, layout)
    scale = overview_scale(drawing)
    image = render_overview(drawing, base_fills(drawing), scale) if scale else None
    return LaidOut(drawing, image, scale, time.perf_counter() - start)
