"""The A/B window's data (Qt-free): both arms' losses, their divergence and gradient cosine.

Fed on the GUI thread from the app's mailbox (``RunBuffer.push_ab`` on the training thread,
``SessionController.flush`` here), like the main curves: one route, in order, whatever the
step rate; the window redraws on ``changed`` through its own throttle.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psygnal import Signal


class ABSeries:
    """Events: ``changed()`` after new steps; ``described(str)`` the two arms in one line;
    ``ended(str)`` when the run is over ("" when it finished, else why it failed)."""

    changed = Signal()
    described = Signal(str)
    ended = Signal(str)

    def __init__(self) -> None:
        self.steps: list[int] = []
        self.plain: list[float] = []
        self.hooked: list[float] = []
        self.divergence: list[float] = []
        self.cosine: list[float] = []
        self.identical: list[bool] = []
        self.latest: Any = None  # the newest ABStep
        self.description = ""
        self.finished = False
        self.failure = ""

    def extend(self, steps: Sequence[Any]) -> None:
        """Take in lockstep steps (``ABStep``), oldest first."""
        if not steps:
            return
        for step in steps:
            self.steps.append(step.step)
            self.plain.append(step.plain.loss)
            self.hooked.append(step.hooked.loss)
            self.divergence.append(step.divergence)
            self.cosine.append(step.grad_cosine)
            self.identical.append(step.identical)
        self.latest = steps[-1]
        self.changed.emit()

    def apply(self, kind: str, payload: Any) -> None:
        """One message of the run, as the mailbox carried it: ``("steps", [ABStep…])``,
        ``("ready", text)``, ``("failed", text)`` or ``("done", None)``."""
        if kind == "steps":
            self.extend(payload)
        elif kind == "ready":
            self.description = payload
            self.described.emit(payload)
        elif kind == "failed":
            self.failure = payload
        elif kind == "done":
            self.finished = True
            self.ended.emit(self.failure)
