"""Under an address-space limit (``ulimit -v``) threads with big stacks cannot be created:
the app's background work still runs (on a smaller stack, or on the GUI thread), never waits
for a thread that never started."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("PySide6")

_SCRIPT = textwrap.dedent("""
    import mmap, resource, sys
    from PySide6.QtCore import QEventLoop, QTimer
    from PySide6.QtWidgets import QApplication
    from gradexplorer.gui.graph.layout_worker import BackgroundQueue

    app = QApplication([])
    queue = BackgroundQueue()
    results = []
    loop = QEventLoop()
    queue.finished.connect(lambda number, value: (results.append(value), loop.quit()))
    QTimer.singleShot(20_000, loop.quit)
    size = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status")
                if line.startswith("VmSize:"))
    headroom = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_AS, (size + headroom, resource.RLIM_INFINITY))
    if sys.argv[2] == "queue":
        queue.request(lambda: sum(range(1000)))
    else:  # the training thread: its job's result comes back, or one line says why not
        from gradexplorer.core.messages.errors import UserError
        from gradexplorer.gui.session.controller import SessionController

        try:
            controller = SessionController()
        except UserError as exc:
            print("refused:", exc)
            sys.exit(0)
        controller._worker.job_done.connect(lambda value: (results.append(value), loop.quit()))
        controller._worker.post(lambda: sum(range(1000)))
    if not results:
        loop.exec()
    print("result", results)
""")


def _run(headroom_mb: int, kind: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _SCRIPT, str(headroom_mb << 20), kind],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})


@pytest.mark.parametrize("kind", ["queue", "controller"])
def test_work_runs_on_a_default_stack_when_a_deep_one_cannot_start(kind):
    """768 MB of room: no 2 GiB stack fits, a default one does."""
    done = _run(768, kind)
    assert "result [499500]" in done.stdout, (done.stdout, done.stderr[-2000:])


def test_no_thread_at_all_is_one_line_never_a_hang():
    """3 MB of room: no new thread fits; the layout runs on the GUI thread, saying so, and the
    training thread's absence is one line."""
    done = _run(3, "queue")
    assert "result [499500]" in done.stdout, (done.stdout, done.stderr[-2000:])
    assert "cannot start a thread" in done.stderr
    done = _run(3, "controller")
    assert "refused: cannot start the app's worker thread" in done.stdout, done.stderr[-2000:]
