"""Window shortcuts work whatever has focus; plain letters still type into text fields."""

from __future__ import annotations

from PySide6.QtCore import Qt


def focused_window(qtbot, make_window):
    window = make_window()
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=30_000)
    return window


def test_ctrl_e_exports_with_focus_in_a_text_field(qtbot, make_window, monkeypatch):
    window = focused_window(qtbot, make_window)
    asked = []
    monkeypatch.setattr(window.file_actions, "_folder", lambda title: asked.append(title))
    for field in (window.graph_panel.search_edit, window.model_filter.text_edit,
                  window.run_controls.lr_spin):
        field.setFocus()
        qtbot.waitUntil(field.hasFocus, timeout=30_000)
        with qtbot.waitSignal(window.file_actions.export_action.triggered, timeout=30_000):
            qtbot.keyClick(field, Qt.Key_E, Qt.ControlModifier)
    assert asked == ["Export snapshot into folder"] * 3


def test_a_command_wins_over_a_key_the_text_field_would_keep(qtbot, make_window):
    # Ctrl+E is "end of line" in text fields under X11 key bindings (not offscreen's); Ctrl+Left
    # (word left) is one everywhere: a command on it must still run from a text field.
    from PySide6.QtGui import QAction, QKeySequence

    window = focused_window(qtbot, make_window)
    action = QAction("test command", window, shortcut=QKeySequence("Ctrl+Left"))
    window.addAction(action)
    field = window.graph_panel.search_edit
    field.setFocus()
    qtbot.waitUntil(field.hasFocus, timeout=30_000)
    with qtbot.waitSignal(action.triggered, timeout=30_000):
        qtbot.keyClick(field, Qt.Key_Left, Qt.ControlModifier)
    window.shortcuts_first._remove()  # without it the field keeps the key
    with qtbot.assertNotEmitted(action.triggered, wait=200):
        qtbot.keyClick(field, Qt.Key_Left, Qt.ControlModifier)


def test_letters_and_editing_keys_stay_with_the_text_field(qtbot, make_window):
    window = focused_window(qtbot, make_window)
    field = window.graph_panel.search_edit
    field.setFocus()
    qtbot.waitUntil(field.hasFocus, timeout=30_000)
    qtbot.keyClicks(field, "hfc")
    assert field.text() == "hfc" and window.hook_actions.menu is None
    qtbot.keyClick(field, Qt.Key_A, Qt.ControlModifier)  # select all, not a command
    assert field.selectedText() == "hfc"
