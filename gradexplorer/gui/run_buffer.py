"""A thread-safe mailbox between the training thread and the GUI: small results only."""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from gradexplorer.core.session.engine import StepResult


@dataclass(frozen=True)
class StepPoint:
    """The scalars of one step that the curves and the status bar show."""

    step: int
    loss: float
    grad_norm: float | None
    seconds: float


@dataclass
class RunUpdate:
    """Everything that arrived since the GUI last looked."""

    points: list[StepPoint] = field(default_factory=list)
    gradients: list[Any] = field(default_factory=list)  # StepGradients, oldest first
    events: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, module, message)
    steps_per_second: float = 0.0

    @property
    def latest(self) -> StepPoint | None:
        """The newest step, if any."""
        return self.points[-1] if self.points else None


class RunBuffer:
    """Producer side: ``push`` per step (worker thread). Consumer side: ``drain`` (GUI timer)."""

    def __init__(self, max_gradients: int = 256, rate_window: float = 2.0) -> None:
        self._lock = threading.Lock()
        self._pending = RunUpdate()
        self._max_gradients = max_gradients
        self._rate_window = rate_window
        self._times: deque[float] = deque()

    def push(self, result: StepResult) -> None:
        """Record one finished step (called on the training thread)."""
        point = StepPoint(result.step, result.loss, result.grad_norm, result.seconds)
        gradients = result.extras.get("gradients")
        now = time.monotonic()
        with self._lock:
            self._pending.points.append(point)
            if gradients is not None:
                self._pending.gradients.append(gradients)
                del self._pending.gradients[: -self._max_gradients]
            self._times.append(now)
            while self._times and now - self._times[0] > self._rate_window:
                self._times.popleft()

    def push_event(self, kind: str, module: str, message: str) -> None:
        """Record a hook or run event (any thread)."""
        with self._lock:
            self._pending.events.append((kind, module, message))

    def drain(self) -> RunUpdate | None:
        """Take what arrived since the last drain, or None when nothing did."""
        with self._lock:
            update = self._pending
            if not (update.points or update.events):
                return None
            self._pending = RunUpdate()
            update.steps_per_second = self._rate()
        return update

    def _rate(self) -> float:
        times = self._times
        if len(times) < 2:
            return 0.0
        span = max(times[-1] - times[0], time.monotonic() - times[-1])
        return (len(times) - 1) / span if span > 0 else 0.0
