"""When the window is first painted and when the first graph is drawn (bench/gui.py --startup).

With ``GRADEXPLORER_STARTUP_LOG=FILE`` set, the app appends ``window <time> <cpu>``, ``graph
<time> <cpu>`` and ``live <time> <cpu>`` lines (``time.time()``, and the CPU seconds the process
has used so far, every thread's: on a shared machine the load inflates the wall time, hardly the
CPU time) to FILE: the window painted, the first graph drawn (from the graph cache when it has the
model: ``cached_first_graph``), the live traced graph drawn; then it closes. The benchmark
subtracts the moment it started the process.
A ``preload`` line comes first when torch's library is loaded on a spare core while the window
is built (``native_preload``).
"""

from __future__ import annotations

import os
import time

from PySide6.QtCore import QEvent, QObject, QTimer

LOG_VARIABLE = "GRADEXPLORER_STARTUP_LOG"


class StartupClock(QObject):
    """Watches the main window's and the graph view's first paints."""

    def __init__(self, window, path: str) -> None:
        super().__init__(window)
        self.window, self.path, self.noted = window, path, set()
        self.viewport = window.graph_panel.view.viewport()
        window.installEventFilter(self)
        self.viewport.installEventFilter(self)

    def note(self, what: str) -> None:
        if what not in self.noted:
            self.noted.add(what)
            with open(self.path, "a", encoding="utf-8") as log:
                log.write(f"{what} {time.time():.6f} {time.process_time():.3f}\n")

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt API
        if event.type() == QEvent.Paint:
            if obj is self.window:
                self.note("window")
            elif obj is self.viewport and self.window.graph_panel.drawing is not None:
                self.note("graph")
                if self.window.graph_panel.live_drawing is not None:
                    self.note("live")
                    QTimer.singleShot(0, self.window.close)
        return False


def watch_startup(window, preloading: bool = False) -> StartupClock | None:
    """A StartupClock on ``window`` when the benchmark asked for one (``preloading``: noted)."""
    path = os.environ.get(LOG_VARIABLE)
    clock = StartupClock(window, path) if path else None
    if clock is not None and preloading:
        clock.note("preload")
    return clock
