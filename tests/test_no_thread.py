"""A thread that cannot be started ("can't start new thread": a process or address-space
limit) is one line and a fallback, never a hang or a traceback: the run's writes, the
statistics worker and the deep-stack worker go on on the calling thread."""

from __future__ import annotations

import threading

import pytest
import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.core.graph.deep_stack import run_with_deep_stack
from gradexplorer.core.stats.backends.numba import worker as stats_worker
from gradexplorer.session import MonitorWarning


@pytest.fixture
def no_thread_named(monkeypatch):
    """Make ``threading.Thread.start`` fail, as it does at a limit, for threads whose name
    holds any of the given words."""
    start = threading.Thread.start

    def refuse(*words):
        def failing_start(self):
            if any(word in self.name for word in words):
                raise RuntimeError("can't start new thread")
            return start(self)

        monkeypatch.setattr(threading.Thread, "start", failing_start)

    return refuse


def train(model, opt, steps, rec):
    for step in range(steps):
        g = torch.Generator().manual_seed(step)
        x, y = torch.randn(16, 6, generator=g), torch.randn(16, 3, generator=g)
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        rec.note_loss(loss)
        opt.step()


def test_watch_without_a_writer_thread_records_on_the_training_thread(tmp_path, no_thread_named):
    no_thread_named("run-writer")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.warns(MonitorWarning) as told, gx.watch(model, opt, tmp_path / "run", bins=8) as rec:
        train(model, opt, 70, rec)  # more writes than one batch: some committed on the way
        before = {n: p.grad.detach().double().clone() for n, p in model.named_parameters()}
    lines = [str(w.message) for w in told]
    assert lines == ["gradexplorer: cannot start the run's writer thread (can't start new "
                     "thread); writing on the training thread instead"]
    run = gx.open_run(tmp_path / "run")
    assert run.steps == list(range(1, 71))
    for name, g in before.items():
        assert run.stats(70)[name].norm == pytest.approx(float(g.norm()), rel=1e-12)


def test_the_statistics_worker_falls_back_to_the_training_thread(no_thread_named, monkeypatch):
    monkeypatch.setattr(stats_worker, "_POOL", None)
    monkeypatch.setattr(stats_worker, "ENABLED", True)
    no_thread_named("gradexplorer-stats")
    ran = []
    with pytest.warns(RuntimeWarning) as said:  # core's one failure channel: a warning
        stats_worker._hand_over(ran.append, 1)
        stats_worker._hand_over(ran.append, 2)
    assert ran == [] and stats_worker.ENABLED is False  # the callers do the work themselves
    assert [str(w.message).count("cannot start the statistics worker thread")
            for w in said] == [1]


def test_the_deep_stack_worker_falls_back_to_this_thread(no_thread_named):
    no_thread_named("deep-stack")
    with pytest.warns(RuntimeWarning) as said:
        assert run_with_deep_stack(lambda: threading.current_thread().name) == \
            threading.current_thread().name
    assert len(said) == 1 and "cannot start a thread with a 2048 MB stack" in str(said[0].message)


def test_a_run_that_cannot_be_followed_says_so_in_a_dialog(qtbot, make_window, tmp_path,
                                                           monkeypatch, no_thread_named):
    from gradexplorer.gui import errors

    shown = []
    monkeypatch.setattr(errors.QMessageBox, "critical", lambda parent, title, text: shown.append(text))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gx.watch(model, opt, tmp_path / "run", bins=8) as rec:
        train(model, opt, 2, rec)
    window = make_window()
    no_thread_named("run follower")
    follower = window.file_actions.open_run(str(tmp_path / "run"))
    assert follower is not None and window.controller.timeline.latest.step == 2  # shown
    assert len(shown) == 1 and "cannot follow the run" in shown[0] and "\n" not in shown[0]
    assert not follower.following
