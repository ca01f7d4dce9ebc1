"""Step reporting for the terminal: a line per step, or a live progress bar on a TTY."""

from __future__ import annotations

import sys
import time
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


PROGRESS_SECONDS = 5.0  # a long export or report says how far it got at most this often


class ProgressLines:
    """``export: step 4,000 of 20,000 (20%)`` on stderr every PROGRESS_SECONDS while a long
    command works through a run's steps; on a terminal one line, redrawn. Quiet when quick."""

    def __init__(self, what: str, total: int, stream: TextIO | None = None) -> None:
        self.what, self.total, self.done = what, total, 0
        self.stream = stream or sys.stderr
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self.shown = False
        self.due = time.monotonic() + PROGRESS_SECONDS

    def __call__(self, *_step: object) -> None:
        """One more step done (the step itself, when given, is not needed)."""
        self.done += 1
        if time.monotonic() >= self.due:
            self.say(f"step {self.done:,} of {self.total:,} ({100 * self.done // max(1, self.total)}%)")

    def stage(self, text: str) -> None:
        """``text`` (what the command starts on now) when a progress line is due."""
        if time.monotonic() >= self.due:
            self.say(text)

    def say(self, text: str) -> None:
        """``text`` as this command's progress line now (a stage, when no step count fits)."""
        line = f"{self.what}: {text}"
        if self.live:
            self.stream.write(f"\r{line}\x1b[K")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
        self.shown = True
        self.due = time.monotonic() + PROGRESS_SECONDS

    def close(self) -> None:
        if self.live and self.shown:
            self.stream.write("\n")
            self.stream.flush()
