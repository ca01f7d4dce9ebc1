"""The app's threads cannot crash it: torch's lazy machinery is set up by the training thread
alone, Python's cyclic collector runs on the GUI thread only (so no Qt object is deleted off
it), and a native crash leaves every thread's stack in the crash log the About box names."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

from gradexplorer.gui.crash_log import crash_log_path
from gradexplorer.gui.gui_thread_gc import GuiThreadCollector, collect_on_gui_thread

ROOT = Path(__file__).resolve().parents[1]

# A fresh interpreter (torch not imported yet) builds the window and opens the app's first model
# as the app does, then trains three steps; it reports which thread imported each torch module
# and on which thread each garbage collection ran.
FIRST_MODEL = r"""
import gc, json, sys, threading
from importlib.abc import MetaPathFinder

imports = []

class Recorder(MetaPathFinder):
    on = False

    def find_spec(self, name, path, target=None):
        if Recorder.on and name.partition(".")[0] == "torch":
            imports.append([name, threading.current_thread() is threading.main_thread()])
        return None

sys.meta_path.insert(0, Recorder())
Recorder.on = True  # the window imports no torch at all: the training thread imports it
from PySide6.QtCore import QTimer
from gradexplorer.core.model.options import ModelOptions
from gradexplorer.core.session.config import SessionConfig
from gradexplorer.gui.app import application, build_window, scratch_settings
from gradexplorer.gui.settings import AppSettings

app = application()
window = build_window(AppSettings(scratch_settings()))
window.show()
collections = []
gc.callbacks.append(lambda phase, info: phase == "start" and collections.append(
    threading.current_thread() is threading.main_thread()))
# as the app opens its first model: the first graph drawn before training is set up
window.open_model("example:digits", ModelOptions(batch_size=16), SessionConfig(device="cpu"))
ran = []

def poll():
    controller = window.controller
    if controller.session.live is not None and not window.busy():
        if not ran:
            ran.append(controller.session.live.session.step_count)
            controller.run(3)
        elif controller.session.live.session.step_count >= ran[0] + 3:
            window.close()
            app.quit()
            return
    QTimer.singleShot(20, poll)

poll()
app.exec()
print(json.dumps({"imports": imports, "collections": collections, "automatic": gc.isenabled()}))
"""


def test_first_model_sets_torch_up_on_the_training_thread_and_collects_on_the_gui_thread(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run([sys.executable, "-c", FIRST_MODEL], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    on_main = [name for name, main in report["imports"] if main]
    on_worker = {name for name, main in report["imports"] if not main}
    assert "torch" in on_worker
    # the session's optimizers step without torch.compile's machinery (eager_optimizers.py)
    assert "torch._dynamo" not in on_worker | set(on_main)
    assert on_main == []  # the GUI thread never waits on (or races) a lazy torch import
    assert report["collections"] and all(report["collections"]), report["collections"]
    assert report["automatic"] is False


def make_cycles(count: int) -> None:
    """``count`` self-referencing dicts left for the cyclic collector."""
    for _ in range(count):
        cycle = {}
        cycle["self"] = cycle


def test_collector_collects_what_the_thresholds_call_for_and_keeps_automatic_collection_off(qapp):
    collector = collect_on_gui_thread()
    assert isinstance(collector, GuiThreadCollector) and collect_on_gui_thread() is collector
    assert not gc.isenabled()
    gc.collect()
    make_cycles(3 * collector.thresholds[0])
    assert collector.collect_due() >= 3 * collector.thresholds[0]
    assert collector.collect_due() == 0  # nothing due right after a collection
    gc.enable()  # a library turning it back on
    collector.collect_due()
    assert not gc.isenabled()


def test_a_held_collector_collects_nothing_until_resumed(qapp):
    collector = collect_on_gui_thread()
    gc.collect()
    collector.hold()  # the app's start, until the first graph is drawn
    try:
        make_cycles(3 * collector.thresholds[0])
        assert collector.collect_due() == 0
    finally:
        collector.resume()
    assert collector.collect_due() >= 3 * collector.thresholds[0]


def test_a_native_crash_leaves_every_threads_stack_in_the_crash_log(tmp_path):
    crash = ("import threading, time, faulthandler\n"
             "from gradexplorer.gui.crash_log import start_crash_log\n"
             "print(start_crash_log())\n"
             "threading.Thread(target=time.sleep, args=(60,), name='trainer', daemon=True).start()\n"
             "faulthandler._sigsegv()\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_DATA_HOME": str(tmp_path)}
    for _ in range(2):  # a second crash is appended; the first stays
        done = subprocess.run([sys.executable, "-c", crash], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode < 0  # died of the signal
    log = tmp_path / "gradexplorer" / "crash.log"
    assert done.stdout.strip() == str(log)
    text = log.read_text()
    assert text.count("Fatal Python error: Segmentation fault") == 2
    assert text.count("started") == 2 and 'File "<string>", line 5' in text
    assert "Thread 0x" in text.split("Current thread")[1]  # the other thread's stack too


def test_no_crash_log_is_one_line_and_the_app_goes_on(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    code = ("from pathlib import Path\nfrom gradexplorer.gui.crash_log import start_crash_log\n"
            f"print(start_crash_log(Path({str(blocker / 'crash.log')!r})))\n")
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip() == "None"
    assert len(done.stderr.strip().splitlines()) == 1 and "no crash log" in done.stderr


def test_the_about_box_names_the_crash_log(qtbot, app_data_home):
    from gradexplorer.gui.dialogs.about_dialog import AboutDialog

    box = AboutDialog()
    qtbot.addWidget(box)
    lines = dict(line.split(": ", 1) for line in box.details.splitlines())
    assert lines["crash log"] == str(crash_log_path())
    assert crash_log_path() == app_data_home / "gradexplorer" / "crash.log"


# A window closed while its training thread is still busy (a long step or job outlives
# ``shutdown``'s wait, as under load): the window, its controller and the worker's object are
# freed, and the worker's own frame holds the last reference. When the job ends, Python would
# free the QThread on its own, still running, thread: Qt aborts the process.
OUTLIVED_SHUTDOWN = r"""
import gc, threading, time
from PySide6.QtWidgets import QApplication
from gradexplorer.gui.session import session_worker

app = QApplication([])
go, started = threading.Event(), threading.Event()
worker = session_worker.SessionWorker()
worker.start()
worker.post(lambda: (started.set(), go.wait()))
started.wait()
print("ended in time:", worker.shutdown(timeout_ms=10))
del worker
gc.collect()
go.set()
deadline = time.monotonic() + 120
while session_worker._STARTED and time.monotonic() < deadline:
    app.processEvents()
    time.sleep(0.01)
print("released:", not session_worker._STARTED)
"""


def test_a_worker_that_outlives_its_shutdown_is_kept_until_its_thread_ends(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run([sys.executable, "-c", OUTLIVED_SHUTDOWN], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.split("\n")[:2] == ["ended in time: False", "released: True"]
    assert "Destroyed while thread" not in done.stderr
