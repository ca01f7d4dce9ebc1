"""When the window is first painted, the first graph drawn and the app ready to step
(bench/gui.py --startup, bench/cold_start.py).

With ``GRADEXPLORER_STARTUP_LOG=FILE`` set, the app appends ``window <time> <cpu>``, ``graph
<time> <cpu>``, ``live <time> <cpu>``, ``ready <time> <cpu>`` and ``stepped <time> <cpu>`` lines
(``time.time()``, and the CPU seconds the process has used so far, every thread's: on a shared
machine the load inflates the wall time, hardly the CPU time) to FILE: the window painted, the
first graph drawn (from the graph cache when it has the model: ``cached_first_graph``), the live
traced graph drawn, the model's session open with Step enabled (then it steps once, as a user
clicking Step at once would), that first step done and ``plots <time> <cpu>``: the plots made
(pyqtgraph's, after Step is enabled); then it closes. The benchmark subtracts
the moment it started the process.
A ``preload`` line comes first when torch's library is loaded on a spare core while the window
is built (``native_preload``).
"""

from __future__ import annotations

import os
import time

from PySide6.QtCore import QEvent, QObject, QTimer

from gradexplorer.gui.session.controller import IDLE

LOG_VARIABLE = "GRADEXPLORER_STARTUP_LOG"


class StartupClock(QObject):
    """Watches the main window's and the graph view's first paints."""

    def __init__(self, window, path: str) -> None:
        super().__init__(window)
        self.window, self.path, self.noted = window, path, set()
        self.viewport = window.graph_panel.view.viewport()
        window.installEventFilter(self)
        self.viewport.installEventFilter(self)
        window.controller.session.opened.connect(self._opened)
        window.controller.session.state_changed.connect(self._state)

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
                    self._close_when_done()
        return False

    def _opened(self, _live) -> None:
        if "ready" not in self.noted and self.window.run_controls.step_action.isEnabled():
            self.note("ready")
            self.window.controller.step()  # a user clicking Step as soon as it is enabled

    def _state(self, state: str) -> None:
        if state == IDLE and "ready" in self.noted and self.window.controller.session.live is not None:
            self.note("stepped")
            self._close_when_done()

    def plots_made(self) -> None:
        """The plots are made (``MainWindow.build_plots``: after ready); noted once painted."""
        QTimer.singleShot(0, self, lambda: (self.note("plots"), self._close_when_done()))

    def _close_when_done(self) -> None:
        if {"live", "stepped", "plots"} <= self.noted:
            QTimer.singleShot(0, self.window.close)


def watch_startup(window, preloading: bool = False) -> StartupClock | None:
    """A StartupClock on ``window`` when the benchmark asked for one (``preloading``: noted)."""
    path = os.environ.get(LOG_VARIABLE)
    clock = StartupClock(window, path) if path else None
    if clock is not None and preloading:
        clock.note("preload")
    return clock
