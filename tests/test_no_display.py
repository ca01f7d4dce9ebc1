"""Without a display, ``gradexplorer`` trains headless and says so; ``gradexplorer gui`` explains."""

import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="X11/Wayland check")


@pytest.fixture
def no_display(monkeypatch):
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        monkeypatch.delenv(name, raising=False)


def test_bare_command_falls_back_to_a_headless_run(run_cli, no_display):
    code, out, err = run_cli("--model", "example:mlp", "--steps", "2")
    assert code == 0, err
    assert out.startswith("gradexplorer: no display to open a window on")
    assert [line.split()[1] for line in out.splitlines() if line.startswith("step ")] == ["1/2", "2/2"]


def test_gui_command_without_display_is_one_clear_line(run_cli, no_display):
    code, _, err = run_cli("gui", "--model", "example:mlp")
    assert code == 2
    assert err.startswith("gradexplorer: error: no display to open a window on") and err.count("\n") == 1


def test_open_command_without_display_is_one_clear_line(run_cli, no_display, tmp_path):
    code, _, err = run_cli("run", "--model", "example:mlp", "--steps", "1", "--export", tmp_path)
    assert code == 0, err
    code, _, err = run_cli("open", tmp_path / "step-000001")
    assert code == 2
    assert err.startswith("gradexplorer: error: no display to open a window on") and err.count("\n") == 1
