"""What is typed in a spin box is what runs: F7 or a click on a tool button leaves the focus in
the box, so nothing had committed the text (typing 8 then F7 ran the 20 shown before)."""

from __future__ import annotations

from PySide6.QtCore import Qt

from tests.gui_helpers import TIMEOUT_MS, open_model, wait_idle


def type_into(qtbot, spin, text: str) -> None:
    spin.setFocus()
    qtbot.waitUntil(spin.hasFocus, timeout=30_000)
    spin.selectAll()
    qtbot.keyClicks(spin.lineEdit(), text)  # typed, no Enter


def test_typed_run_n_steps_and_lr_are_what_runs(qtbot, make_window):
    window = make_window()
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=30_000)
    open_model(qtbot, window, "example:digits")
    controls, session = window.run_controls, window.controller.session.live.session
    type_into(qtbot, controls.steps_spin, "8")
    assert controls.steps_spin.value() == 20  # not committed by typing alone
    qtbot.keyClick(controls.steps_spin.lineEdit(), Qt.Key_F7)
    qtbot.waitUntil(lambda: session.step_count == 8 and not window.busy(), timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    assert session.step_count == 8
    type_into(qtbot, controls.lr_spin, "0.0375")
    qtbot.keyClick(controls.lr_spin.lineEdit(), Qt.Key_F6)  # one step, at the typed lr
    qtbot.waitUntil(lambda: session.step_count == 9, timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    assert session.optimizer.param_groups[0]["lr"] == 0.0375
