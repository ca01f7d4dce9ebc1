"""How a session trains, and the flags that stop or pause a run: plain Python, no torch, so the
app and the command line can name them before torch is imported (``engine`` re-exports them)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

OPTIMIZERS = ("sgd", "adam")
DEFAULT_LR = {"sgd": 0.05, "adam": 1e-3}


@dataclass
class SessionConfig:
    """How a session trains: device, optimizer, learning rate, seed."""

    device: str = "auto"
    optimizer: str = "sgd"
    lr: float | None = None  # None: the workload's suggestion, else DEFAULT_LR
    momentum: float | None = None  # None: the workload's suggestion, else 0
    seed: int = 0
    grad_norm: bool = True


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
