"""Start-up order (issue 22 item 10): the window imports none of torch, Numba, SciPy, networkx or
pyqtgraph, and it is painted before torch is imported, which the training thread does; the first
graph (the cached one: gui/graph/graph_cache.py) is drawn with it, the live graph after. How fast
is bench/gui.py --startup's job; these check the order that makes it fast."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "numba", "scipy", "networkx", "sympy", "safetensors", "pyqtgraph", "superqt", "qtpy")

# The command line's parser for `gui` and the whole main window, shown and painted; then the
# plots it makes once the first graph is drawn.
WINDOW_ONLY = r"""
import json, sys
from gradexplorer.cli import build_parser
build_parser(["gui"]).parse_args(["gui"])
from gradexplorer.gui.app import application, build_window, scratch_settings
from gradexplorer.gui.settings import AppSettings

from gradexplorer.core.model.options import DEFAULT_SPEC, ModelOptions
from gradexplorer.gui.window.cached_first_graph import CachedFirstGraph

app = application(plots=False)
window = build_window(AppSettings(scratch_settings()), plots_later=True)  # as the app starts
CachedFirstGraph(window, DEFAULT_SPEC, ModelOptions())  # its first graph, from the graph cache
window.show()
window.repaint()
app.processEvents()
heavy = sorted({m.partition(".")[0] for m in sys.modules} & set(sys.argv[1].split(",")))
assert window.graph_panel.cached is not None and len(window.graph_panel.drawing) > 10
plots = window.build_plots()  # then its plots, in their docks
made = [type(dock.widget()).__name__ for dock in (window.gradients_dock, window.curves_dock)]
window.close()
print(json.dumps([heavy, made, "pyqtgraph" in sys.modules]))
"""

# `gradexplorer gui` as launched, noting when and on which thread torch's import starts;
# GRADEXPLORER_STARTUP_LOG makes the app note its first paints (window, first graph: the cached
# one, live graph), when Step is enabled (ready: it steps once) and that step done, then close.
LAUNCH = r"""
import json, sys, threading, time
from importlib.abc import MetaPathFinder

first = {}

class Watch(MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "torch" and not first:
            first.update(time=time.time(), main=threading.current_thread() is threading.main_thread())
        return None

sys.meta_path.insert(0, Watch())
from gradexplorer.gui import native_preload
native_preload.core_to_spare = lambda: sys.argv[1:] == ["preload"]  # a core to spare or not
import gc
collected = []
gc.callbacks.append(lambda phase, info: phase == "start" and collected.append(time.time()))
import os
real_exit = os._exit

def report(status):  # closed while the model is set up: the process ends at once (os._exit)
    print(json.dumps({"status": status, "torch": first, "collected": collected, "at": at_mark}),
          flush=True)
    real_exit(status)

os._exit = report
from gradexplorer.gui.window import startup_clock
at_mark = {}  # what was made or imported when each mark was noted
note = startup_clock.StartupClock.note
startup_clock.StartupClock.note = lambda clock, what: (at_mark.setdefault(what, {
    "plots": clock.window._plots is not None, "dynamo": "torch._dynamo" in sys.modules,
    "sympy": "sympy" in sys.modules}), note(clock, what))
from gradexplorer.cli import main
report(main(["gui", "--model", "example:digits", "--device", "cpu"]))
"""


def run(code: str, tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "QT_QPA_PLATFORM": "offscreen",
           "XDG_CONFIG_HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache"), **env}
    return subprocess.run([sys.executable, "-c", code, *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)


def test_the_window_and_its_cached_graph_import_no_torch_numba_scipy_networkx_or_pyqtgraph(tmp_path):
    done = run(WINDOW_ONLY, tmp_path, ",".join(HEAVY))
    assert done.returncode == 0, done.stderr[-3000:]
    heavy, made, plotted = json.loads(done.stdout.strip().splitlines()[-1])
    assert heavy == []
    assert made == ["GradientPanel", "TrainingCurves"] and plotted


@pytest.mark.parametrize("preload", [False, True])
def test_the_window_is_painted_before_the_training_thread_imports_torch(tmp_path, preload):
    """With a core to spare, torch's native library is loaded meanwhile (gui/native_preload.py),
    started once the window is built, before its paint; torch's import is unchanged."""
    log = tmp_path / "startup.log"
    done = run(LAUNCH, tmp_path, *(["preload"] if preload else []), GRADEXPLORER_STARTUP_LOG=str(log))
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    marks = {name: float(at) for name, at, _cpu in map(str.split, log.read_text().splitlines())}
    assert ("preload" in marks) is preload and marks.pop("preload", 0) <= marks["window"]
    assert report["status"] == 0 and set(marks) == {"window", "graph", "live", "ready", "stepped", "plots"}
    assert marks["window"] <= marks["ready"] <= marks["stepped"]  # Step enabled, then one step done
    assert marks["ready"] <= marks["plots"]  # the plots made after Step is enabled
    torch = report["torch"]
    assert torch and torch["main"] is False  # imported by the training thread, not the GUI's
    assert marks["window"] <= torch["time"] <= marks["live"]
    # the default example's first graph, from the shipped graph cache, is drawn before torch's
    # import even starts (with the window: it is on the panel before the window shows)
    assert marks["graph"] <= torch["time"]
    # no garbage collection on the live graph's way (torch's import: collected once after it)
    assert not [t for t in report["collected"] if marks["window"] < t < marks["live"]]
    # Step is enabled before the plots are made (pyqtgraph and a dozen plots: a second of the
    # GUI thread), and nothing up to the first step done imports torch._dynamo or sympy (torch's
    # own optimizers would: 1.3 s of CPU; the session's are eager_optimizers.py's)
    at = report["at"]
    assert at["ready"]["plots"] is False
    assert not at["stepped"]["dynamo"] and not at["stepped"]["sympy"]


# `gradexplorer gui` on a model whose build takes a minute (as torch's import and a big model's
# build and trace take seconds): the window is closed once the build has begun.
CLOSE_WHILE_LOADING = r"""
import json, sys, threading, time
from PySide6.QtCore import QObject, Signal
from gradexplorer.gui.window import main_window

building = threading.Event()  # set by the model file on the training thread

class Closer(QObject):
    close_now = Signal()

def show(window, shown=main_window.MainWindow.show):
    shown(window)
    window.closer = Closer()
    window.closer.close_now.connect(window.close)  # queued: emitted on another thread

    def close_once_building():
        building.wait()
        print(json.dumps({"closing": time.time()}), flush=True)
        window.closer.close_now.emit()
    threading.Thread(target=close_once_building, daemon=True).start()

main_window.MainWindow.show = show
from gradexplorer.cli import main
sys.exit(main(["gui", "--model", sys.argv[1], "--device", "cpu"]))
"""

SLOW_MODEL = """
import sys, time

def build():
    sys.modules["__main__"].building.set()
    time.sleep(120)
"""


def test_closing_while_the_first_model_opens_ends_the_process_at_once(tmp_path):
    """Nothing is lost (no model open yet): the process does not wait for the training thread
    (importing torch, building or tracing the first model: 10-16 s on ResNet-18), and exits 0
    with the window's settings written."""
    import time

    model = tmp_path / "slow.py"
    model.write_text(SLOW_MODEL)
    done = run(CLOSE_WHILE_LOADING, tmp_path, f"{model}:build")
    ended = time.time()
    assert done.returncode == 0, done.stderr[-3000:]
    closing = json.loads(done.stdout.strip().splitlines()[-1])["closing"]
    assert ended - closing < 5  # not the model's 120 s (measured: 0.1 s)
    settings = (tmp_path / "gradexplorer" / "gradexplorer.conf").read_text()
    assert "geometry" in settings  # saved before the process ended
