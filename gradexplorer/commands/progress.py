"""Step reporting for the terminal: a line per step, or a live progress bar on a TTY."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from gradexplorer.core.session.engine import StepResult


def format_step(result: StepResult, total: int | None) -> str:
    """``step 3/10  loss 0.123456  grad-norm 0.0456  4.2 ms``."""
    of = f"/{total}" if total else ""
    norm = "n/a" if result.grad_norm is None else f"{result.grad_norm:.4g}"
    return (
        f"step {result.step}{of}  loss {result.loss:.6g}  grad-norm {norm}  "
        f"{result.seconds * 1000:.1f} ms"
    )


class StepReporter:
    """Prints each step; on a terminal, redraws one progress-bar line instead."""

    def __init__(self, total: int | None, stream: TextIO | None = None, width: int = 24) -> None:
        self.total = total
        self.stream = stream or sys.stdout
        self.width = width
        self.live = bool(getattr(self.stream, "isatty", lambda: False)()) and bool(total)

    def __call__(self, result: StepResult) -> None:
        text = format_step(result, self.total)
        if not self.live:
            print(text, file=self.stream, flush=True)
            return
        filled = int(self.width * result.step / max(1, self.total or 1))
        bar = "█" * filled + "·" * (self.width - filled)
        self.stream.write(f"\r{bar} {text}\x1b[K")
        self.stream.flush()

    def close(self) -> None:
        if self.live:
            self.stream.write("\n")
            self.stream.flush()
