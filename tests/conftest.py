"""Test set-up: Qt runs offscreen (no display needed), torch uses few threads, the app's data
folder is a throw-away one, the GUI tests run in a shuffled order; the fixtures every test
module may use."""

import os
import sys

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("MPLBACKEND", "Agg")
# the statistics kernels' first use waits for them (core/stats/backends/kernel_warmup.py):
# every test's figures
# from Numba from its first step, as before; tests/test_stats_warmup.py checks the fallback
os.environ.setdefault("GRADEXPLORER_KERNELS", "wait")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(min(2, torch.get_num_threads()))

from gui_order import (  # noqa: E402, F401 - the --gui-order option's hooks
    pytest_addoption,
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_report_header,
)


@pytest.fixture(scope="session", autouse=True)
def app_data_home(tmp_path_factory):
    """The app's data folder (the crash log) and cache folder (the graph cache) under a
    temporary XDG_DATA_HOME and XDG_CACHE_HOME, for this process and the gradexplorer processes
    the tests start: never the user's own."""
    folder = tmp_path_factory.mktemp("xdg-data")
    previous = {name: os.environ.get(name) for name in ("XDG_DATA_HOME", "XDG_CACHE_HOME")}
    os.environ["XDG_DATA_HOME"] = str(folder)
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    yield folder
    for name, value in previous.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(autouse=True)
def collect_garbage_on_the_gui_thread():
    """Once the app has turned automatic garbage collection over to the GUI thread
    (``gui.gui_thread_gc``), collect after each test as its timer would, on this (the GUI)
    thread: tests that never spin the event loop must not pile up garbage."""
    yield
    module = sys.modules.get("gradexplorer.gui.gui_thread_gc")
    collector = module.gui_collector() if module is not None else None
    if collector is not None:
        collector.collect_due()


@pytest.fixture
def run_cli(capsys):
    """Run the gradexplorer CLI in-process: returns (exit code, stdout, stderr)."""
    from gradexplorer.cli import main

    def _run(*argv: str):
        code = main([str(a) for a in argv])
        out = capsys.readouterr()
        return code, out.out, out.err

    return _run


@pytest.fixture
def make_window(qtbot, tmp_path):
    """Build main windows that remember nothing between tests and always shut down cleanly."""
    from PySide6.QtCore import QSettings

    from gradexplorer.gui.app import build_window
    from gradexplorer.gui.settings import AppSettings

    windows = []

    def _make():
        settings = AppSettings(QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat))
        window = build_window(settings)
        qtbot.addWidget(window)
        window.show()
        windows.append(window)
        return window

    yield _make
    for window in windows:
        window.close()
        assert not window.controller._worker.isRunning()


@pytest.fixture
def one_thread(monkeypatch):
    """One torch thread for every entry point of a comparison: the app leaves the GUI a core
    and a conv's backward sums in another order with another thread count (last-bit
    differences). The app's record of the count it lowered starts empty, so that giving the
    cores back cannot restore a count an earlier test left there."""
    from gradexplorer.gui.training import live_session

    monkeypatch.setattr(live_session, "_THREADS", {"before": None, "holders": set()})
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
