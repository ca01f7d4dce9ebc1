"""What both adapters take: where and how ``watch`` records."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class WatchSettings:
    """The keyword arguments of ``gradexplorer.watch`` (everything but model and optimizer)."""

    run_dir: str | Path | None = None
    every: int = 1
    bins: int = 64
    snapshot_every: int | None = None
    hooks: dict[str, str] | None = None
    keep_snapshots: int | None = None
    overwrite: bool = False
    resume: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def recorder(self, model, optimizer, scaler=None, step_number=None):
        """A Recorder on the framework's torch optimizer: its step hooks (and the closure it is
        given) mark the two measuring points, as in a plain loop; ``step_number`` gives the
        trainer's number of the step under way; ``scaler``: the trainer's GradScaler."""
        from gradexplorer.core.recorder.recorder import Recorder

        return Recorder(model, optimizer, self.run_dir, every=self.every, bins=self.bins,
                        snapshot_every=self.snapshot_every, hooks=self.hooks,
                        keep_snapshots=self.keep_snapshots, scaler=scaler,
                        step_number=step_number, overwrite=self.overwrite, resume=self.resume)
