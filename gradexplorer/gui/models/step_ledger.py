"""The step ledger and spike events of the run the app shows (Qt-free).

Fed by the timeline with each step's ``StepPoint``: its StepLedger (which gradient the figures
describe: as accumulated and as applied, clip coefficient, scale, skipped), the optimizer's
per-parameter state after the step, and the spike events known so far. The in-app session and
a followed run directory fill it the same way (``followed_steps`` reads a run's).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradexplorer.core.steps.ledger import StepLedger, rolling_summary

KEEP = 100_000  # ledgers kept (a few hundred bytes each)
WINDOW = 100  # steps of the rolling clip rate and skip count


class LedgerTrack:
    """Ledgers by step, the accumulated and applied global norm series, the newest optimizer
    state (``name -> ParamOptimState``) and the spike events (by first step)."""

    def __init__(self) -> None:
        self.generation = 0  # how many times the track started over (a new model or run)
        self.clear()

    def clear(self) -> None:
        self.generation += 1
        self.ledgers: deque[StepLedger] = deque(maxlen=KEEP)
        self._by_step: dict[int, StepLedger] = {}
        self.optimizer_state: dict[str, Any] = {}
        self.spikes: dict[int, Any] = {}

    def take(self, points) -> None:
        """Take in the extras of new steps (StepPoints, oldest first)."""
        for point in points:
            ledger = getattr(point, "ledger", None)
            if ledger is not None:
                if len(self.ledgers) == self.ledgers.maxlen:
                    self._by_step.pop(self.ledgers[0].optimizer_step, None)
                self.ledgers.append(ledger)
                self._by_step[ledger.optimizer_step] = ledger
            if getattr(point, "optimizer", None):
                self.optimizer_state = point.optimizer
            for event in getattr(point, "spikes", ()) or ():
                self.spikes[event.step] = event  # a later copy of an event (grown) replaces it

    def ledger_at(self, step: int) -> StepLedger | None:
        return self._by_step.get(step)

    @property
    def latest(self) -> StepLedger | None:
        return self.ledgers[-1] if self.ledgers else None

    def series(self) -> tuple[list[float], list[float], list[float]]:
        """(steps, accumulated norms ÷ the GradScaler's scale, applied norms); NaN where
        unknown (a skipped step has no applied norm). Divided by the scale, the accumulated
        norm is comparable with the applied one: their ratio is the clip coefficient."""
        steps = [float(led.optimizer_step) for led in self.ledgers]
        acc = [_value(led.grad_norm_accumulated) / (led.scale or 1.0) for led in self.ledgers]
        applied = [_value(led.grad_norm_applied) for led in self.ledgers]
        return steps, acc, applied

    def figure(self, field: str) -> tuple[np.ndarray, np.ndarray]:
        """``(steps, values)`` of one StepLedger field (``grad_norm_accumulated``, ``scale`` …)
        as recorded, NaN where a step has none."""
        steps = np.array([led.optimizer_step for led in self.ledgers], dtype=np.int64)
        return steps, np.array([_value(getattr(led, field)) for led in self.ledgers], dtype=np.float64)

    def skipped_steps(self) -> list[int]:
        return [led.optimizer_step for led in self.ledgers if led.skipped]

    def summary(self, window: int = WINDOW) -> dict:
        """The core's rolling clip rate and skip count over the last ``window`` steps."""
        return rolling_summary(list(self.ledgers)[-window:], window)

    def events(self) -> list:
        """Spike events, oldest first."""
        return [self.spikes[s] for s in sorted(self.spikes)]


def _value(value: float | None) -> float:
    return math.nan if value is None else float(value)


@dataclass(frozen=True)
class FollowedStep:
    """What a followed run adds to a step's StepPoint: its StepLedger, the optimizer's state
    after it (newest step only) and the spike events recorded so far (newest step only)."""

    ledger: StepLedger | None
    optimizer: Any = None
    spikes: tuple = ()


def followed_steps(run, rows: list[dict], after: int) -> dict[int, FollowedStep]:
    """For a followed run: ``step -> FollowedStep`` of the steps in ``rows`` (read after
    ``after``): every step's ledger, the newest step's optimizer state, and on the newest step
    every spike event recorded so far."""
    if not rows:
        return {}
    ledgers = {led.optimizer_step: led for led in run.ledger(after=after)}
    out = {row["step"]: FollowedStep(ledgers.get(row["step"])) for row in rows}
    newest = rows[-1]["step"]
    out[newest] = FollowedStep(out[newest].ledger, run.optimizer_state(newest),
                               tuple(run.spike_events()))
    return out
