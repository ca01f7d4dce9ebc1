"""gui/throttle.py: the views' redraw throttles (what superqt's qthrottled/qdebounced did): the
latest arguments win, the trailing call is never lost, a leading call runs at once, a debouncer
waits for a pause; flush, cancel, weak bound methods, psygnal's argument count."""

from __future__ import annotations

import gc

from psygnal import Signal
from PySide6.QtCore import QElapsedTimer, QObject, QTimer

from gradexplorer.gui.throttle import debounced, throttled


class Recorder(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple] = []
        self.times: list[int] = []
        self.clock = QElapsedTimer()
        self.clock.start()

    def redraw(self, value=None) -> None:
        self.calls.append((value,))
        self.times.append(self.clock.elapsed())


def test_a_trailing_throttle_runs_once_per_interval_with_the_latest_arguments(qtbot):
    r = Recorder()
    redraw = throttled(r.redraw, timeout=60, leading=False, parent=r)
    for value in range(5):
        redraw(value)
    assert r.calls == [] and redraw.pending()  # nothing before the timer fires
    qtbot.waitUntil(lambda: bool(r.calls), timeout=2000)
    assert r.calls == [(4,)] and not redraw.pending()  # one call, the last arguments
    redraw(5)
    redraw(6)
    qtbot.waitUntil(lambda: len(r.calls) == 2, timeout=2000)
    assert r.calls[-1] == (6,)
    assert r.times[1] - r.times[0] >= 55  # at most once per interval (timer granularity aside)


def test_a_leading_throttle_runs_at_once_and_keeps_the_trailing_call(qtbot):
    r = Recorder()
    redraw = throttled(r.redraw, timeout=60, parent=r)
    redraw(1)
    assert r.calls == [(1,)]  # at once: the timer was idle
    redraw(2)
    redraw(3)
    assert r.calls == [(1,)]  # held back while the interval runs
    qtbot.waitUntil(lambda: len(r.calls) == 2, timeout=2000)
    assert r.calls == [(1,), (3,)]  # the trailing call, with the latest arguments
    assert r.times[1] - r.times[0] >= 55


def test_a_debouncer_waits_for_the_calls_to_pause(qtbot):
    r = Recorder()
    render = debounced(r.redraw, timeout=80, parent=r)
    clock = QElapsedTimer()
    clock.start()
    render("a")
    QTimer.singleShot(40, lambda: render("b"))  # before the wait is over: restarts it
    qtbot.waitUntil(lambda: bool(r.calls), timeout=2000)
    assert r.calls == [("b",)] and clock.elapsed() >= 40 + 75


def test_flush_runs_a_pending_call_now_and_cancel_drops_it(qtbot):
    r = Recorder()
    redraw = throttled(r.redraw, timeout=10_000, leading=False, parent=r)
    redraw(1)
    redraw.flush()
    assert r.calls == [(1,)]
    redraw.flush()  # nothing pending: nothing runs
    assert r.calls == [(1,)]
    redraw(2)
    redraw.cancel()
    redraw.flush()
    assert r.calls == [(1,)] and not redraw.pending()


def test_psygnal_passes_only_the_arguments_the_function_takes(qtbot):
    class Model:
        changed = Signal(object, object)

    model, seen = Model(), []
    owner = QObject()
    redraw = throttled(lambda: seen.append("drawn"), timeout=10_000, leading=False, parent=owner)
    model.changed.connect(redraw)
    model.changed.emit("x", "y")
    redraw.flush()
    assert seen == ["drawn"]

    r = Recorder()
    one = throttled(r.redraw, timeout=10_000, leading=False, parent=r)
    model.changed.connect(one)
    model.changed.emit("x", "y")
    one.flush()
    assert r.calls == [("x",)]


def test_a_bound_method_is_held_weakly(qtbot):
    r = Recorder()
    owner = QObject()
    redraw = throttled(r.redraw, timeout=10_000, leading=False, parent=owner)
    redraw(1)
    del r
    gc.collect()
    redraw.flush()  # the view is gone: nothing runs, nothing raised


def test_an_error_in_the_function_does_not_reach_the_caller(qtbot):
    class Model:
        changed = Signal()

    def broken() -> None:
        raise ValueError("redraw failed")

    owner = QObject()
    redraw = throttled(broken, timeout=10_000, parent=owner)
    model = Model()
    model.changed.connect(redraw)
    with qtbot.captureExceptions() as raised:
        model.changed.emit()  # a leading call: runs inside the emit, which still returns
    assert [type(e[1]) for e in raised] == [ValueError]
