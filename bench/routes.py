"""The routes of one step and one hook click through the app, traced at run time.

    QT_QPA_PLATFORM=offscreen python bench/routes.py [--model example:digits] [--module fc1]

Opens the app's window, then records every call into gradexplorer's own code on the GUI thread
and on the training thread (``sys.setprofile`` on each) while the window runs one step, and
again while a ``block`` hook is attached to a module by the controller, as a click does. It
prints each route as the hops named in docs/architecture.md ("One step's result, hop by hop",
"One hook click, hop by hop"), each with its thread and how often it ran: one route each means
every hop ran once, on its own thread, in that order (``SessionController.flush`` also runs
when the run ends and finds the mailbox empty), and no view was touched from the training
thread. ``tests/test_gui_routes.py`` runs it and checks exactly that.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

STEP_HOPS = ("SessionWorker._run_steps", "TrainingSession.step", "GradientMonitor.after_step",
             "RunBuffer.push", "SessionController.flush", "TimelineModel.extend")
CLICK_HOPS = ("SessionController.attach_hook", "HookRegistry.attach", "SessionController._on_job_done",
              "SessionModel.set_hooks", "MainWindow._hooks_changed", "GraphPanel.change_hooks",
              "GraphPanel.edit_hooks")
# code that belongs on the training thread or in Qt-free models: anything else of the GUI
# package is a view, never run by the training thread (pyside_scan: PySide6's check of each
# module imported, run by whichever thread imports)
NOT_VIEWS = ("gui/session/session_worker.py", "gui/training/", "gui/models/", "gui/pyside_scan.py")


class RouteTrace:
    """Calls into gradexplorer's code, in order: ``(thread, file, qualified name)``; thread is
    "GUI" for the thread that made the trace, else "training"."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []
        self._gui = threading.get_ident()

    def __call__(self, frame, event, _arg):
        if event == "call":
            code = frame.f_code
            path = code.co_filename
            if "gradexplorer" in path and "/bench/" not in path:
                thread = "GUI" if threading.get_ident() == self._gui else "training"
                self.calls.append((thread, path.replace("\\", "/"), code.co_qualname))

    def route(self, hops: tuple[str, ...]) -> list[tuple[str, str]]:
        """``(thread, hop)`` of each call to a hop, in the order they ran."""
        return [(thread, name) for thread, _, name in self.calls if name in hops]

    def views_on_training_thread(self) -> list[str]:
        """GUI code that ran on the training thread, other than the worker, the Qt-free models
        and the controller's jobs (its functions outside ``SessionController``, and lambdas)."""
        return sorted({name for thread, path, name in self.calls if thread == "training"
                       and "/gradexplorer/gui/" in path and not any(p in path for p in NOT_VIEWS)
                       and not _controller_job(path, name)})


def _controller_job(path: str, name: str) -> bool:
    return path.endswith("gui/session/controller.py") and (
        not name.startswith("SessionController.") or "<lambda>" in name)


def traced(window, work: Callable[[], None], wait: Callable[[Callable[[], bool]], None]) -> RouteTrace:
    """Trace ``work()`` on both threads until the window is idle again and has shown it all."""
    trace, controller = RouteTrace(), window.controller
    controller.post(lambda: sys.setprofile(trace))  # a job: on the training thread
    wait(lambda: not window.busy())
    sys.setprofile(trace)
    try:
        work()
        wait(lambda: not window.busy())
    finally:
        sys.setprofile(None)
        controller.post(lambda: sys.setprofile(None))
        wait(lambda: not window.busy())
    return trace


def step_route(window, wait) -> RouteTrace:
    return traced(window, window.controller.step, wait)


def click_route(window, module: str, wait) -> RouteTrace:
    return traced(window, lambda: window.controller.attach_hook(module, "block"), wait)


def show(title: str, trace: RouteTrace, hops: tuple[str, ...]) -> str:
    lines = [title]
    for hop in hops:
        threads = [thread for thread, name in trace.route(hops) if name == hop]
        where = ", ".join(sorted(set(threads))) or "-"
        lines.append(f"  {hop:34s} {len(threads)}×  {where}")
    stray = trace.views_on_training_thread()
    lines.append(f"  views run by the training thread: {', '.join(stray) or 'none'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="example:digits")
    parser.add_argument("--module", default="fc1", help="module to hook (default fc1)")
    args = parser.parse_args(argv)
    import time

    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from gradexplorer.core.model.spec import ModelOptions
    from gradexplorer.core.session.engine import SessionConfig
    from gradexplorer.gui.app import build_window
    from gradexplorer.gui.settings import AppSettings

    app = QApplication.instance() or QApplication([])

    def wait(done: Callable[[], bool], timeout: float = 300.0) -> None:
        end = time.monotonic() + timeout
        while not done():
            if time.monotonic() > end:
                raise TimeoutError("the window did not finish in time")
            app.processEvents()
            time.sleep(0.005)

    with tempfile.TemporaryDirectory() as folder:
        settings = AppSettings(QSettings(str(Path(folder) / "settings.ini"), QSettings.IniFormat))
        window = build_window(settings)
        window.show()
        window.controller.open_model(args.model, ModelOptions(batch_size=16), SessionConfig(device="cpu"))
        wait(lambda: window.controller.session.live is not None and window.graph_panel.drawing is not None)
        wait(lambda: not window.busy())
        print(show(f"one step of {args.model}", step_route(window, wait), STEP_HOPS))
        print(show(f"one hook click ({args.module}: block)", click_route(window, args.module, wait),
                   CLICK_HOPS))
        window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
