"""One step loop (issue 41, item 3): the app's worker steps a run and an A/B run with the core's
``run_steps``, the jobs posted meanwhile executed between their steps."""

from __future__ import annotations

import threading

from gradexplorer.core.model.spec import ModelOptions, load_workload
from gradexplorer.core.session.ab import ABRun
from gradexplorer.core.session.config import RunControl, SessionConfig
from gradexplorer.core.session.engine import TrainingSession
from gradexplorer.gui.hooks.ab_window import ab_job
from gradexplorer.gui.session.session_worker import SessionWorker

STEPS = 20


def lenet():
    return load_workload("example:lenet", ModelOptions(seed=0))


def started_worker(qtbot) -> SessionWorker:
    worker = SessionWorker()
    worker.start()
    qtbot.waitUntil(worker.isRunning, timeout=10_000)
    return worker


def test_a_job_posted_during_an_ab_run_executes_between_its_steps(qtbot):
    worker = started_worker(qtbot)
    control, pushed, seen, done = RunControl(), [], [], threading.Event()

    def job() -> None:  # posted after the A/B's first step: runs before its second
        seen.append(sum(kind == "steps" for kind, _ in pushed))
        control.stop()

    def push(series, kind, payload=None) -> None:  # the A/B's mailbox, on the worker thread
        pushed.append((kind, payload))
        if kind == "steps" and len(seen) == 0 and sum(k == "steps" for k, _ in pushed) == 1:
            worker.post(job)
        if kind == "done":
            done.set()

    make = lambda: ABRun(lenet, SessionConfig(device="cpu"), "fc1", "scale:0.5")  # noqa: E731
    worker.post(ab_job(make, STEPS, control, None, push, between=worker.between_steps(control)))
    try:
        qtbot.waitUntil(done.is_set, timeout=120_000)
    finally:
        assert worker.shutdown()
    steps = [payload for kind, payload in pushed if kind == "steps"]
    assert seen == [1] and [s.step for s in steps] == [1]  # the job stopped it after step 1


def test_a_run_executes_the_jobs_posted_with_it_before_its_first_step(qtbot):
    worker = started_worker(qtbot)
    session = TrainingSession(lenet(), SessionConfig(device="cpu"))
    order, finished = [], []
    worker.run_finished.connect(finished.append)
    worker.post(lambda: order.append(("job", session.step_count)))
    worker.start_run(session, 3)
    worker.post(lambda: order.append(("between", session.step_count)))
    try:
        qtbot.waitUntil(lambda: finished == [3], timeout=120_000)
        worker.post(lambda: order.append(("after", session.step_count)))
        qtbot.waitUntil(lambda: len(order) == 3, timeout=60_000)
    finally:
        assert worker.shutdown()
    assert order == [("job", 0), ("between", 0), ("after", 3)]
    assert session.step_count == 3 and worker.buffer.drain().latest.step == 3


def test_a_hook_that_takes_itself_off_publishes_the_hooks_through_the_mailbox(qtbot, make_window):
    from gui_helpers import open_model, wait_idle

    from gradexplorer.gui.models.session import HooksChanged

    window = make_window()
    open_model(qtbot, window, "example:lenet")
    controller, tables, job_tables = window.controller, [], []
    controller.session.hooks_changed.connect(tables.append)
    controller.session.job_finished.connect(
        lambda result: job_tables.append(result.hooks) if isinstance(result, HooksChanged) else None)
    controller.attach_hook("fc1", "once:scale:0.5")
    wait_idle(qtbot, window)
    controller.run(1)  # the hook acts once and detaches itself on the training thread
    wait_idle(qtbot, window)
    assert tables == [{"fc1": "once:scale:0.5"}, {}] and controller.session.hooks == {}
    assert job_tables == [{"fc1": "once:scale:0.5"}]  # the attach's job; no re-sync job after it
