"""``gradexplorer gui --hook MODULE=ACTION --select NAME``: applied once the first model opens."""

from __future__ import annotations

from gradexplorer.gui.window.startup_actions import StartupActions
from tests.gui_helpers import open_model, wait_idle


def test_startup_hooks_and_selection_apply_before_the_first_run(qtbot, make_window):
    window = make_window()
    StartupActions(window, [("fc1", "block")], "conv1.weight")
    open_model(qtbot, window)
    window.controller.run(2)
    wait_idle(qtbot, window)
    live = window.controller.session.live
    assert {path: hook.action for path, hook in live.hooks.attached().items()} == {"fc1": "block"}
    assert window.selection.current.param == "conv1.weight"
    assert live.session.model.conv1.weight.grad is None  # blocked from the very first step
    assert live.session.model.fc1.weight.grad is not None


def test_unknown_selection_is_reported(qtbot, make_window, monkeypatch):
    from gradexplorer.gui import errors as error_dialogs

    dialogs = []
    monkeypatch.setattr(error_dialogs.QMessageBox, "critical", lambda *args: dialogs.append(args[2]))
    window = make_window()
    errors = []
    window.controller.session.error.connect(errors.append)
    StartupActions(window, [], "conv9.weight")
    open_model(qtbot, window)
    assert errors == ["--select 'conv9.weight': no such parameter or module"]
    assert dialogs == errors
