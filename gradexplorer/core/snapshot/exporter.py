"""SnapshotExporter: a session observer that writes snapshots at chosen steps and the last."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from psygnal import Signal

from gradexplorer.core.messages.errors import emit_guarded
from gradexplorer.core.snapshot.retention import steps_to_remove
from gradexplorer.core.snapshot.write import write_step_snapshot

# Per parameter, the manifest's JSON (stats, name, shape, histogram edges and counts) and the
# CSV rows take roughly this many bytes, plus about this many per histogram bin.
MANIFEST_BYTES_PER_PARAM = 900
MANIFEST_BYTES_PER_BIN = 45


class SnapshotExporter:
    """Write a snapshot under ``directory`` every ``snapshot_every`` steps (0: never) and at
    ``last_step``.

    ``registry``: the HookRegistry whose hooks and captured tensors the snapshots include (as
    every entry point's, ``write_step_snapshot``); ``wrote(step, path)`` (psygnal) follows each
    snapshot.
    ``keep_snapshots`` (None: all) removes this exporter's snapshots beyond the newest N
    (``retention.steps_to_remove``, as a watched run's directory does).
    Add it after the GradientMonitor so that each step's statistics are ready.
    """

    wrote = Signal(int, object)

    def __init__(self, directory: str | os.PathLike, monitor=None, snapshot_every: int = 0,
                 last_step: int | None = None,
                 registry=None, keep_snapshots: int | None = None) -> None:
        every, keep = snapshot_every, keep_snapshots
        if every < 0:
            raise ValueError(f"snapshot_every must be 0 (last step only) or positive, got {every}")
        if keep is not None and keep < 1:
            raise ValueError(f"keep_snapshots must be at least 1, got {keep}")
        self.directory = Path(directory)
        self.monitor, self.snapshot_every, self.last_step = monitor, every, last_step
        self.registry, self.keep_snapshots = registry, keep
        self._by_step: dict[int, Path] = {}  # step -> snapshot folder, kept ones
        self.folder = None  # the ExportFolder claim of whoever started it, released on stop

    def due(self, step: int) -> bool:
        """Whether step ``step`` (1-based) is exported."""
        every = self.snapshot_every
        return (every > 0 and step % every == 0) or step == self.last_step

    def planned(self, first_step: int, last_step: int) -> int:
        """How many snapshots steps ``first_step..last_step`` write (before retention)."""
        if last_step < first_step:
            return 0
        k = self.snapshot_every
        every = (last_step // k - (first_step - 1) // k) if k else 0
        last = self.last_step is not None and first_step <= self.last_step <= last_step
        return every + int(last and not (k and self.last_step % k == 0))

    def kept(self, first_step: int, last_step: int) -> int:
        """How many snapshots stay on disk at the end of steps ``first_step..last_step``."""
        count = self.planned(first_step, last_step)
        return count if self.keep_snapshots is None else min(count, self.keep_snapshots)

    def after_step(self, session, result) -> None:
        if not self.due(result.step):
            return
        path = write_step_snapshot(
            self.directory, session, result.gradients, self.registry,
            history=self.monitor.history if self.monitor is not None else None,
            diagnosis=result.nonfinite_origin)
        self._by_step[result.step] = path
        self._retain()
        emit_guarded(self.wrote, "a subscriber of the written snapshots", result.step, path)

    @property
    def written(self) -> list[Path]:
        """The snapshots this exporter wrote that are still kept, oldest step first."""
        return [self._by_step[step] for step in sorted(self._by_step)]

    def _retain(self) -> None:
        for step in steps_to_remove(self._by_step, self.keep_snapshots):
            shutil.rmtree(self._by_step.pop(step), ignore_errors=True)


def snapshot_bytes(model, bins: int = 64, history_steps: int = 1) -> int:
    """About how many bytes one snapshot of ``model``'s gradients takes on disk."""
    params = [p for p in model.parameters() if p.requires_grad]
    tensors = sum(p.numel() * p.element_size() for p in params)
    per_param = MANIFEST_BYTES_PER_PARAM + MANIFEST_BYTES_PER_BIN * bins
    return tensors + len(params) * (per_param + 120 * history_steps)
