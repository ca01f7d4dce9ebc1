"""Redraws at most once per interval: ``throttled`` and ``debounced`` callables on a QTimer.

The semantics of superqt's ``qthrottled``/``qdebounced`` (KDAB's signal throttler), which the
views used before; importing superqt's package imports all its widgets and qtpy, a fifth of a
second before the window could show. A call records its arguments (the latest win) and marks a
call pending; a pending call runs when the timer fires, and the timer restarts after each run,
so calls keep coming through at most once per interval, the last one always included (the
trailing call). ``leading``: a call while the timer is idle runs at once. A debouncer restarts
its timer on every call, so it runs once the calls have paused for the interval.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from contextlib import suppress
from types import MethodType
from weakref import WeakMethod

from PySide6.QtCore import QObject, Qt, QTimer, Signal


class Throttled(QObject):
    """A callable that calls ``func`` (with the latest arguments, as many as it takes) at most
    once per ``timeout`` ms; ``flush`` runs a pending call now, ``cancel`` drops it. A bound
    method is held weakly (a view's throttle never keeps the view alive). ``func`` runs from a
    Qt signal, like a slot: an exception in it is reported by Qt's handler, not raised into the
    caller (an emitting model)."""

    triggered = Signal()

    def __init__(self, func: Callable, timeout: int, leading: bool = True, debounce: bool = False,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._func = _weak(func)
        self._max_args: int | None = None  # any number of positional arguments
        with suppress(TypeError, ValueError):
            signature = inspect.signature(func)
            self.__signature__ = signature  # what psygnal passes: func's arguments
            self._max_args = _max_args(signature)
        self._args: tuple = ()
        self._kwargs: dict = {}
        self._pending = False
        self._leading, self._debounce = leading, debounce
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setInterval(timeout)
        self._timer.timeout.connect(self.flush)
        self.triggered.connect(self._call)

    def __call__(self, *args, **kwargs) -> None:
        self._args, self._kwargs, self._pending = args, kwargs, True
        if self._leading and not self._timer.isActive():
            self._emit()
        if self._debounce or not self._timer.isActive():
            self._timer.start()  # a debouncer restarts; a throttle keeps its running interval

    def timeout(self) -> int:
        """The interval in milliseconds."""
        return self._timer.interval()

    def pending(self) -> bool:
        """Whether a call waits for the timer."""
        return self._pending

    def flush(self) -> None:
        """Run the pending call now (nothing if none)."""
        if self._pending:
            self._emit()

    def cancel(self) -> None:
        """Drop the pending call."""
        self._pending = False

    def _emit(self) -> None:
        self._pending = False
        self.triggered.emit()
        self._timer.start()

    def _call(self) -> None:
        args = self._args if self._max_args is None else self._args[:self._max_args]
        self._func(*args, **self._kwargs)


def throttled(func: Callable, timeout: int, leading: bool = True,
              parent: QObject | None = None) -> Throttled:
    """``func`` at most once per ``timeout`` ms, the trailing call included; ``leading``: the
    first call after a quiet interval runs at once (else when the timer fires)."""
    return Throttled(func, timeout, leading=leading, parent=parent)


def debounced(func: Callable, timeout: int, parent: QObject | None = None) -> Throttled:
    """``func`` once the calls have paused for ``timeout`` ms (with the last call's arguments)."""
    return Throttled(func, timeout, leading=False, debounce=True, parent=parent)


def _weak(func: Callable) -> Callable:
    """A bound method held weakly (a dead one does nothing); anything else as it is."""
    if not isinstance(func, MethodType):
        return func
    method = WeakMethod(func)

    def call(*args, **kwargs):
        bound = method()
        if bound is not None:
            bound(*args, **kwargs)
    return call


def _max_args(signature: inspect.Signature) -> int | None:
    """How many positional arguments a function of this signature takes (None: any number)."""
    parameters = signature.parameters.values()
    if any(p.kind is p.VAR_POSITIONAL for p in parameters):
        return None
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in parameters)
