"""Python's cyclic garbage collector, run by the GUI thread only (the scheme of pyqtgraph's
``GarbageCollector``).

A reference cycle that holds a Qt object (a closed window's menus and lambdas, a plot's items)
is freed by whichever thread happens to allocate when a collection threshold is crossed, most
often the training thread, which allocates the most. PySide then deletes that Qt object off the
GUI thread, behind its back: a deadlock or a segfault. So in the app automatic collection is off
for the whole process and a timer on the GUI thread collects, by the interpreter's own rules:
a generation when its threshold is crossed, the oldest only when it has grown by a quarter
(a full collection of torch's objects holds the GIL for a good fraction of a second).
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QThread, QTimer
from PySide6.QtWidgets import QApplication

INTERVAL_MS = 250


class GuiThreadCollector(QObject):
    """Keeps automatic collection off and collects on the GUI thread, every ``INTERVAL_MS``."""

    def __init__(self, parent: QObject) -> None:
        super().__init__(parent)
        self.thresholds = gc.get_threshold()
        self.collections = 0  # collections this collector made (any generation)
        self._long_lived = len(gc.get_objects(2))
        self.held = False
        gc.disable()
        self.timer = QTimer(self)
        self.timer.timeout.connect(self.collect_due)
        self.timer.start(INTERVAL_MS)

    def collect_due(self) -> int:
        """Collect the generations whose thresholds were crossed; returns objects freed."""
        if gc.isenabled():  # someone turned it back on (a library's own gc.enable())
            gc.disable()
        young, middle, old = gc.get_count()
        if young <= self.thresholds[0] or self.held:
            return 0
        generation = 0
        if middle + 1 > self.thresholds[1]:
            generation = 1
            if old + 1 > self.thresholds[2] and self._old_grown():
                generation = 2
        freed = gc.collect(generation)
        self.collections += 1
        if generation == 2:
            self._long_lived = len(gc.get_objects(2))
        return freed

    def hold(self) -> None:
        """Collect nothing until ``resume``: at the app's start, while the training thread
        imports torch (a million objects, hardly any garbage) for the first graph, rather than
        scan the new objects every 250 ms on that graph's way; they are collected once after."""
        self.held = True

    def resume(self) -> None:
        """Collect by the thresholds again (from the next tick)."""
        self.held = False

    def _old_grown(self) -> bool:
        """Whether the oldest generation grew by a quarter since its last collection
        (CPython's own rule against quadratic full collections)."""
        return len(gc.get_objects(2)) - self._long_lived > self._long_lived // 4


def collect_on_gui_thread() -> GuiThreadCollector:
    """Install (once) the GUI-thread collector on the QApplication; call on the GUI thread."""
    app = QApplication.instance()
    if app is None or QThread.currentThread() is not app.thread():
        raise RuntimeError("collect_on_gui_thread() must be called on the GUI thread of a QApplication")
    collector = app.findChild(GuiThreadCollector)
    if collector is None:
        collector = GuiThreadCollector(app)
    elif gc.isenabled():
        gc.disable()
    return collector


def gui_collector() -> GuiThreadCollector | None:
    """The installed collector, if any."""
    app = QApplication.instance()
    return app.findChild(GuiThreadCollector) if app is not None else None
