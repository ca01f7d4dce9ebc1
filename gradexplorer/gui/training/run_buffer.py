"""A thread-safe mailbox between the training thread and the GUI: small results only (Qt-free).

The worker pushes; the first push into an empty mailbox asks for one wake-up of the GUI
thread (``notify``), which drains everything that arrived by then. Each step's gradient record
(the monitor's ``StepGradients``, complete once the step is published) travels with its point;
what observe hooks saw does too, as plain records (``ObservedGrads``).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gradexplorer.gui.models.timeline import StepPoint

if TYPE_CHECKING:
    from gradexplorer.core.session.engine import StepResult


@dataclass
class RunUpdate:
    """Everything that arrived since the GUI last looked."""

    points: list[StepPoint] = field(default_factory=list)
    events: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, module, message)
    steps_per_second: float = 0.0
    observed: dict = field(default_factory=dict)  # module -> ObservedGrads (the newest)
    ab: list[tuple[Any, str, Any]] = field(default_factory=list)  # (ABSeries, kind, payload)
    hooks: dict[str, str] | None = None  # module -> action attached after the newest change

    @property
    def latest(self) -> StepPoint | None:
        """The newest step, if any."""
        return self.points[-1] if self.points else None


class RunBuffer:
    """Producer side: ``push``/``push_event`` (any thread). Consumer side: ``drain`` (GUI)."""

    def __init__(self, notify: Callable[[], None] = lambda: None, rate_window: float = 2.0) -> None:
        self._lock = threading.Lock()
        self._pending = RunUpdate()
        self._notify = notify
        self._rate_window = rate_window
        self._times: deque[float] = deque()

    def push(self, result: StepResult) -> None:
        """Record one finished step (called on the training thread)."""
        spike = result.spike
        gradients = result.gradients  # the monitor's record: its update ratios
        ratios = None if gradients is None else {
            name: s.update_ratio for name, s in gradients.params.items() if s.update_ratio is not None}
        point = StepPoint(result.step, result.loss, result.grad_norm, result.seconds,
                          result.ledger, result.optimizer_state,
                          (spike,) if spike is not None else (), ratios, time.time(), gradients,
                          result.noise)
        now = time.monotonic()
        with self._lock:
            wake = self._empty()
            self._pending.points.append(point)
            self._pending.observed.update(result.observed or {})
            self._times.append(now)
            while self._times and now - self._times[0] > self._rate_window:
                self._times.popleft()
        if wake:
            self._notify()

    def push_event(self, kind: str, module: str, message: str,
                   hooks: dict[str, str] | None = None) -> None:
        """Record a hook or run event (any thread); ``hooks``: the hooks attached after it
        (module -> action), published with it (the newest table wins)."""
        with self._lock:
            wake = self._empty()
            self._pending.events.append((kind, module, message))
            if hooks is not None:
                self._pending.hooks = dict(hooks)
        if wake:
            self._notify()

    def push_hooks(self, hooks: dict[str, str]) -> None:
        """The hooks attached now (module -> action), after a hook took itself off (any
        thread; the newest table wins)."""
        with self._lock:
            wake = self._empty()
            self._pending.hooks = dict(hooks)
        if wake:
            self._notify()

    def push_ab(self, series: Any, kind: str, payload: Any = None) -> None:
        """A message of an A/B run for ``series`` (an ABSeries, applied on the GUI thread):
        ``steps`` (one ABStep; consecutive ones travel as one list), ``ready``, ``failed``,
        ``done`` (any thread)."""
        with self._lock:
            wake = self._empty()
            ab = self._pending.ab
            if kind == "steps" and ab and ab[-1][0] is series and ab[-1][1] == "steps":
                ab[-1][2].append(payload)
            else:
                ab.append((series, kind, [payload] if kind == "steps" else payload))
        if wake:
            self._notify()

    def _empty(self) -> bool:
        pending = self._pending
        return not (pending.points or pending.events or pending.observed or pending.ab
                    or pending.hooks is not None)

    def drain(self) -> RunUpdate | None:
        """Take what arrived since the last drain, or None when nothing did."""
        with self._lock:
            update = self._pending
            if self._empty():
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
