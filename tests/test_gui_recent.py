"""File → Recent models and Recent snapshots: remembered in the settings, opened from the menu."""

from __future__ import annotations

from gradexplorer.gui.settings import RECENT_MAX
from tests.gui_helpers import TIMEOUT_MS, export, open_model, wait_idle


def _entries(menu) -> list[str]:
    menu.rebuild()
    return [a.text() for a in menu.actions() if a.isEnabled() and not a.isSeparator()
            and a.text() != "Clear list"]


def test_recent_models_are_remembered_and_open_from_the_file_menu(qtbot, make_window):
    window = make_window()
    assert window.menus.recent_models_menu in [a.menu() for a in window.menus.file_menu.actions()]
    assert _entries(window.menus.recent_models_menu) == []
    open_model(qtbot, window)
    window.settings.add_recent("models", "example:mlp")
    assert _entries(window.menus.recent_models_menu) == ["example:mlp", "example:digits"]
    chosen = next(a for a in window.menus.recent_models_menu.actions() if a.text() == "example:digits")
    chosen.trigger()  # back to digits from the menu
    qtbot.waitUntil(lambda: window.controller.session.live is not None, timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    assert window.controller.session.live.spec == "example:digits"
    assert _entries(window.menus.recent_models_menu) == ["example:digits", "example:mlp"]  # newest first
    for i in range(RECENT_MAX + 3):
        window.settings.add_recent("models", f"m{i}")
    assert len(_entries(window.menus.recent_models_menu)) == RECENT_MAX


def test_recent_snapshots_open_and_a_vanished_one_is_dropped(qtbot, make_window, tmp_path):
    window = make_window()
    open_model(qtbot, window)
    window.controller.run(1)
    wait_idle(qtbot, window)
    path = export(qtbot, window, tmp_path / "snaps")
    viewer = window.file_actions.open_snapshot(str(path))
    qtbot.addWidget(viewer)
    menu = window.menus.recent_snapshots_menu
    assert _entries(menu) == [str(path.resolve())]
    before = len(window.file_actions.snapshot_windows)
    next(a for a in menu.actions() if a.text() == str(path.resolve())).trigger()
    assert len(window.file_actions.snapshot_windows) == before + 1
    for w in window.file_actions.snapshot_windows:
        qtbot.addWidget(w)
    errors = []
    window.show_error = errors.append
    window.settings.add_recent("snapshots", str(tmp_path / "gone"))
    _entries(menu)
    next(a for a in menu.actions() if a.text() == str(tmp_path / "gone")).trigger()
    assert errors and "no longer exists" in errors[0]
    assert _entries(menu) == [str(path.resolve())]
    menu.clear_list()
    assert _entries(menu) == []
