"""The one channel of a monitor's failures: ``MonitorWarning``, said once per distinct failure.

Whatever gradexplorer cannot do while it watches a loop (a measurement, a write to the run
directory, spike detection, a snapshot, a thread that cannot start) never breaks the loop: it
is told in one line, once, and the loop goes on. Core tells it one way, a ``MonitorWarning``
(a ``RuntimeWarning``, so filters on either catch it). ``FailureChannel`` is that channel for
one recorder or run writer: it says each distinct line once, and, where the caller gives a
``report`` (``watch(report=…)``, ``RunWriter(report=…)``), hands the line to it instead, as
before. A line told on another thread (the run's writer thread) waits for the thread that
made the channel, which tells it at its next step boundary (``tell_waiting``). A warning
filter that turns it into an error (``-W error``) never ends the loop nor a background thread:
the line is printed to stderr instead, as ``watch`` printed it before.
"""

from __future__ import annotations

import sys
import threading
import warnings
from collections import deque
from collections.abc import Callable


class MonitorWarning(RuntimeWarning):
    """Something gradexplorer could not do while it watched; the training went on."""


def tell_failure(line: str, stacklevel: int = 3) -> None:
    """``line`` as one MonitorWarning (a caller that tells a failure once keeps its own set);
    printed to stderr where a warning filter makes it an error: the loop goes on."""
    try:
        warnings.warn(line, MonitorWarning, stacklevel=stacklevel)
    except MonitorWarning:
        print(line, file=sys.stderr)


class FailureChannel:
    """Where a recorder's failure lines go: each distinct line once, to ``report`` when given,
    else as a MonitorWarning on the thread that made the channel. Call it with the line."""

    def __init__(self, report: Callable[[str], None] | None = None) -> None:
        self.report = report
        self.told: list[str] = []  # every distinct line, in order
        self._seen: set[str] = set()
        self._waiting: deque[str] = deque()
        self._owner = threading.get_ident()
        self._lock = threading.Lock()

    @classmethod
    def of(cls, report) -> FailureChannel:
        """``report`` itself where it is a channel already (shared by a recorder's parts),
        else a channel handing its lines to it (None: warnings)."""
        return report if isinstance(report, FailureChannel) else cls(report)

    def __call__(self, line: str) -> None:
        with self._lock:
            if line in self._seen:
                return
            self._seen.add(line)
            self.told.append(line)
            if self.report is None and threading.get_ident() != self._owner:
                self._waiting.append(line)
                return
        if self.report is not None:
            self.report(line)
        else:
            tell_failure(line, stacklevel=3)

    def __deepcopy__(self, memo: dict) -> FailureChannel:
        """The channel itself: a copy of a watched model (``copy.deepcopy(model)``, an EMA
        twin) copies the hooks watch attached, and their channel is the recorder's, shared."""
        return self

    @property
    def waiting(self) -> bool:
        """Lines told on another thread that the owner has not said yet."""
        return bool(self._waiting)

    def tell_waiting(self) -> None:
        """Say the lines told on other threads (on the owner's thread: a step boundary, close)."""
        while self._waiting and threading.get_ident() == self._owner:
            tell_failure(self._waiting.popleft(), stacklevel=3)
