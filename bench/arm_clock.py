"""``ArmClock``: the training thread's CPU spent in one arm's steps, for benches whose arms take
turns on one thread (bench/watch_floor.py, bench/noise_scale.py). A clock that watch's own
measures can be given — a budget's (``CostBudget``) or ``noise_every="auto"``'s — so that they
count their arm's steps only, not every other arm's in between."""

from __future__ import annotations

import time


class ArmClock:
    """``begin()`` before an arm's step, ``end()`` after it; called, the CPU counted so far."""

    def __init__(self) -> None:
        self.total, self.start = 0.0, None

    def __call__(self) -> float:
        return self.total + (0.0 if self.start is None else time.thread_time() - self.start)

    def begin(self) -> None:
        self.start = time.thread_time()

    def end(self) -> None:
        self.total, self.start = self(), None
