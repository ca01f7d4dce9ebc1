"""Every window attribute is declared in MainWindow.__init__; helpers change the window's state
through methods of objects it owns (issue 20, item 4): the run shown instead of the model
(``ShownRun``), the hook menu and A/B windows (``HookActions``)."""

from __future__ import annotations

import re
from pathlib import Path

from gradexplorer.gui.models.shown_run import ShownRun

GUI = Path(__file__).resolve().parents[1] / "gradexplorer" / "gui"
# an attribute read with a default (it may not exist yet) or attached from outside
UNDECLARED = re.compile(r"(?:getattr|hasattr)\((?:self|window)\s*,\s*[\"']|\bwindow\.(?:_run_view_wired|"
                        r"run_follower|run_waiter|viewing_run|ab_windows|hook_menu)\b")


def test_the_window_and_its_run_view_read_no_attribute_that_may_be_missing():
    found = [f"{path.name}:{n}: {line.strip()}"
             for path in (GUI / "window/main_window.py", GUI / "runs/run_view.py", GUI / "hooks/hook_menu.py",
                          GUI / "app.py", GUI / "window/menus.py", GUI / "window/plot_views.py")
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if UNDECLARED.search(line)]
    assert found == []


class Recorder:
    def __init__(self, log: list, name: str) -> None:
        self.log, self.name = log, name

    def stop(self) -> None:
        self.log.append(f"{self.name} stopped")

    def close(self) -> None:
        self.log.append(f"{self.name} closed")


def test_a_shown_run_is_waited_for_followed_stopped_and_left():
    shown, log = ShownRun(), []
    assert not shown.showing and shown.follower is None and shown.waiter is None
    shown.enter(Path("runs/a"))
    waiter, follower = Recorder(log, "waiter"), Recorder(log, "follower")
    shown.wait(waiter)
    assert shown.showing and shown.waiter is waiter
    shown.follow(follower)  # the run exists now: no more waiting
    assert shown.waiter is None and shown.is_followed_by(follower) and not shown.is_followed_by(waiter)
    shown.stop()
    assert log == ["follower closed"] and shown.follower is None and shown.showing
    shown.wait(waiter)
    shown.stop()
    assert log == ["follower closed", "waiter stopped"]
    assert shown.leave() and not shown.showing and not shown.leave()


def test_the_window_declares_its_state_before_anything_happens(qtbot, make_window):
    window = make_window()
    assert not window.shown_run.showing and window.hook_actions.menu is None
    assert window.hook_actions.ab_windows == [] and window.exit_status is None
    assert set(window.theme_actions) == {"system", "light", "dark"}
