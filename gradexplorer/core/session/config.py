"""How a session trains, and the flags that stop or pause a run: plain Python, no torch, so the
app and the command line can name them before torch is imported (``engine`` re-exports them)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from gradexplorer.core.messages.errors import UserError

OPTIMIZERS = ("sgd", "adam")
DEFAULT_LR = {"sgd": 0.05, "adam": 1e-3}


@dataclass
class SessionConfig:
    """How a session trains: device, optimizer, learning rate, seed, and ``accumulate``: the
    micro-batches of a step (gradient accumulation: ``make_batch`` drawn that many times, each
    loss divided by it before its backward, then one optimizer step; docs/noise.md)."""

    device: str = "auto"
    optimizer: str = "sgd"
    lr: float | None = None  # None: the workload's suggestion, else DEFAULT_LR
    momentum: float | None = None  # None: the workload's suggestion, else 0
    seed: int = 0
    grad_norm: bool = True
    accumulate: int = 1


MAX_ACCUMULATE = 4096  # micro-batches a step at most


def check_accumulate(value) -> int:
    """``value`` as a number of micro-batches a step (a whole number from 1 to MAX_ACCUMULATE),
    else a UserError in one line."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ACCUMULATE:
        raise UserError(f"micro-batches a step (accumulate) must be a whole number from 1 to "
                        f"{MAX_ACCUMULATE}, got {value!r}")
    return value


class RunControl:
    """Thread-safe pause/stop flags checked between steps."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._running = threading.Event()
        self._running.set()

    def stop(self) -> None:
        self._stop.set()
        self._running.set()

    def pause(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    def wait_while_paused(self, poll: float = 0.05) -> bool:
        """Block while paused; False once a stop is requested."""
        while not self._running.wait(poll):
            pass
        return not self._stop.is_set()
