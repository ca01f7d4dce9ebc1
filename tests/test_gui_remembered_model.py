"""A remembered model that no longer opens: an error dialog, then the default example."""

from __future__ import annotations

from gradexplorer.core.model.spec import DEFAULT_SPEC, ModelOptions
from gradexplorer.core.session.engine import SessionConfig
from gradexplorer.gui.app import fall_back_to_default
from tests.gui_helpers import TIMEOUT_MS, wait_idle


def test_broken_remembered_model_falls_back_to_the_default(qtbot, make_window, monkeypatch, tmp_path):
    from gradexplorer.gui import errors as error_dialogs

    dialogs = []
    monkeypatch.setattr(error_dialogs.QMessageBox, "critical", lambda *args: dialogs.append(args[2]))
    window = make_window()
    fall_back_to_default(window.controller, SessionConfig(device="cpu"))
    window.controller.open_model(f"{tmp_path}/deleted.py:build", ModelOptions(), SessionConfig(device="cpu"))
    qtbot.waitUntil(lambda: window.controller.session.live is not None, timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    assert window.controller.session.live.spec == DEFAULT_SPEC
    assert len(dialogs) == 1 and dialogs[0].startswith("model file not found")
