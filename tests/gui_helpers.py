"""Waiting helpers for the GUI tests (the ``make_window`` fixture is in conftest.py)."""

from __future__ import annotations

from gradexplorer.core.model.spec import ModelOptions
from gradexplorer.core.session.engine import SessionConfig

# generous: a wait ends on its event, and this only bounds a failure (under load, on 2 shared
# cores, the first model of a process takes tens of seconds to open)
TIMEOUT_MS = 180_000


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
