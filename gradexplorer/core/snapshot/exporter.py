"""SnapshotExporter: a session observer that writes snapshots at chosen steps and the last."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gradexplorer.core.snapshot.write import write_snapshot


class SnapshotExporter:
    """Write a snapshot under ``directory`` every ``every`` steps (0: never) and at ``last_step``.

    ``hooks`` and ``captured`` are callables returning the hook descriptions and the captured
    tensors to include (e.g. a HookRegistry's); ``listeners`` get ``(step, path)`` per snapshot.
    Add it after the GradientMonitor so that each step's statistics are ready.
    """

    def __init__(self, directory: str | os.PathLike, monitor=None, every: int = 0,
                 last_step: int | None = None,
                 hooks: Callable[[], list[dict]] | None = None,
                 captured: Callable[[], dict[str, Any]] | None = None) -> None:
        if every < 0:
            raise ValueError(f"every must be 0 (last step only) or positive, got {every}")
        self.directory = Path(directory)
        self.monitor, self.every, self.last_step = monitor, every, last_step
        self.hooks, self.captured = hooks, captured
        self.written: list[Path] = []
        self.listeners: list[Callable[[int, Path], Any]] = []

    def due(self, step: int) -> bool:
        """Whether step ``step`` (1-based) is exported."""
        return (self.every > 0 and step % self.every == 0) or step == self.last_step

    def after_step(self, session, result) -> None:
        if not self.due(result.step):
            return
        path = write_snapshot(
            self.directory, session, result.extras.get("gradients"),
            hooks=self.hooks() if self.hooks else [],
            extra_tensors=self.captured() if self.captured else {},
            history=self.monitor.history if self.monitor is not None else None,
            diagnosis=result.extras.get("nonfinite_origin"),
        )
        self.written.append(path)
        for listener in list(self.listeners):
            listener(result.step, path)
