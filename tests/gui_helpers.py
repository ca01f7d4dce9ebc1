"""Fixtures for the GUI tests: a main window on throw-away settings, and waiting helpers."""

from __future__ import annotations

import gc

import pytest
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication

from gradexplorer.core.model.spec import ModelOptions
from gradexplorer.core.session.engine import SessionConfig

TIMEOUT_MS = 60_000


@pytest.fixture(name="make_window")
def make_window_fixture(qtbot, tmp_path):
    """Build main windows that remember nothing between tests and always shut down cleanly."""
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
    # Collect the closed windows' Python-side cycles (menus, lambdas) here, on the GUI thread:
    # left to the cyclic collector they may be found on the next test's training thread, and
    # PySide then deletes their Qt objects behind the GUI thread's back (a deadlock or crash).
    del windows[:]
    gc.collect()
    QApplication.processEvents()


def wait_idle(qtbot, window, timeout: int = TIMEOUT_MS) -> None:
    """Wait until runs, jobs and layouts have finished and results have been shown."""
    qtbot.waitUntil(lambda: not window.busy(), timeout=timeout)
    window.settle()


def open_model(qtbot, window, spec: str = "example:digits", **options) -> None:
    """Open ``spec`` (batch size 16 unless given) and wait for its graph to be laid out."""
    options.setdefault("batch_size", 16)
    window.controller.open_model(spec, ModelOptions(**options), SessionConfig(device="cpu"))
    qtbot.waitUntil(lambda: window.controller.live is not None
                    and window.graph_panel.drawing is not None, timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
