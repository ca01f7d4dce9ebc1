"""The run follower reads the run's database on a thread of its own: steps written after the
run was opened reach the timeline with no query on the GUI thread, and closing stops it."""

from __future__ import annotations

import threading

import gradexplorer as gx
from gradexplorer.core.runs.run import Run
from tests.gui_helpers import TIMEOUT_MS
from tests.watched_loop import make, train


def test_new_steps_are_read_off_the_gui_thread(qtbot, make_window, tmp_path, monkeypatch):
    readers = []  # the thread of every new-step query
    step_rows = Run.step_rows

    def recorded(self, after=-1):
        readers.append(threading.current_thread())
        return step_rows(self, after)

    monkeypatch.setattr(Run, "step_rows", recorded)
    model, opt = make()
    window = make_window()
    with gx.watch(model, opt, tmp_path / "run", bins=8):
        train(model, opt, 2)
        follower = window.file_actions.open_run(str(tmp_path / "run"))
        assert follower is not None and window.controller.timeline.latest.step == 2
        assert follower.following  # the first poll (the opening) done, the thread polls on
        readers.clear()
        train(model, opt, 3)
    with qtbot.waitSignal(follower.finished, timeout=TIMEOUT_MS) as finished:
        pass
    assert finished.args == [5] and window.controller.timeline.latest.step == 5
    assert list(window.controller.timeline.loss.x) == [1, 2, 3, 4, 5]  # each step once
    assert readers and threading.main_thread() not in readers  # no query on the GUI thread
    # closed as the window closes a run (views first let go of it): closing the follower alone
    # left the heat map's throttled redraw reading the closed database (a teardown error)
    from gradexplorer.gui.runs.run_view import close_run

    close_run(window)
    assert not follower.following
