"""A followed run whose writer is killed (``kill -9``: no ``finished`` entry is ever written)
reads "writer stopped at step N" within 5 s, not "following" at its last rate: the kernel frees
the run directory's lock as the writer dies, and the follower probes it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import gradexplorer as gx
from tests.gui_helpers import TIMEOUT_MS

ROOT = Path(__file__).resolve().parent.parent
WRITER = """
import sys, time
import gradexplorer as gx
from tests.watched_loop import make, train
model, opt = make()
rec = gx.watch(model, opt, sys.argv[1], bins=8)
step = 0
while True:  # until killed
    train(model, opt, 1, step)
    step += 1
    time.sleep(0.05)
"""
STARTUP_MS = 120_000  # the writer's interpreter imports torch on a loaded machine


def test_a_killed_writer_reads_stopped_within_5_s(qtbot, make_window, tmp_path):
    path = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], env=env)
    try:
        window = make_window()
        window.file_actions.open_run(str(path))  # waits for the writer, then follows
        timeline, status = window.controller.timeline, window.status

        def following_steps() -> bool:
            latest = timeline.latest
            return window.shown_run.follower is not None and latest is not None and latest.step >= 4

        qtbot.waitUntil(following_steps, timeout=STARTUP_MS)
        qtbot.waitUntil(lambda: status.rate_label.text()[:1].isdigit(), timeout=TIMEOUT_MS)
        assert status.state_label.text() == "following" and status.rate_label.text().endswith(" steps/s")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        killed = time.monotonic()
        qtbot.waitUntil(lambda: status.state_label.text().startswith("writer stopped"),
                        timeout=5000 + 1500)
        assert time.monotonic() - killed < 5.0 + 1.5
        last = gx.open_run(path).steps[-1]  # every step it committed before dying
        assert status.state_label.text() == f"writer stopped at step {last}"
        assert timeline.latest.step == last
        assert status.rate_label.text() == "— steps/s"  # no rate of a run nobody writes
        assert not window.shown_run.follower.following
        status.show_latest()  # a later redraw of the status bar keeps saying so
        assert status.rate_label.text() == "— steps/s"
        assert status.state_label.text() == f"writer stopped at step {last}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
