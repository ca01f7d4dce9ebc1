"""Session observer: the optimizer's per-parameter state after each step, for the app (Qt-free).

The core's ``optimizer_state`` (the figures ``watch`` records: lr, ‖m‖, RMS √v̂, effective lr,
‖momentum‖) put in ``result.optimizer_state``, which the app's mailbox carries. A
failure is told once and ends the reporting, never the training.
"""

from __future__ import annotations

import sys

from gradexplorer.core.messages.errors import first_line
from gradexplorer.core.stats.optimizer_state import optimizer_state


class OptimizerStateReporter:
    """Add after the optimizer steps (any position: it observes ``after_step``)."""

    def __init__(self, report=None) -> None:
        self.failed = False
        self._report = report or (lambda line: print(line, file=sys.stderr))

    def after_step(self, session, result) -> None:
        if self.failed:
            return
        try:
            result.optimizer_state = optimizer_state(
                session.optimizer, list(session.model.named_parameters()))
        except Exception as exc:  # noqa: BLE001 - never break the training being observed
            self.failed = True
            self._report(f"gradexplorer: optimizer state not shown from step {result.step}: "
                         f"{first_line(exc)}; training goes on")
