"""What both adapters take: where and how ``watch`` records, and what goes to the trainer's
own logger."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class WatchSettings:
    """The keyword arguments of ``gradexplorer.watch`` (everything but model and optimizer)."""

    run_dir: str | Path | None = None
    stats_every: int = 1
    bins: int = 64
    snapshot_every: int | None = None
    hooks: dict[str, str] | None = None
    keep_snapshots: int | None = None
    overwrite: bool = False
    resume: bool = False
    histogram_every: int = 1
    noise_every: int | str = "auto"  # the noise scale's cadence (docs/noise.md)
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, where: str, run_dir, stats_every: int, histogram_every: int, every, **kwargs):
        """The settings an adapter's arguments give (``every``: stats_every's old name)."""
        from gradexplorer.core.messages.errors import renamed

        stats_every = renamed(where, "every", "stats_every", every, stats_every, 1)
        return cls(run_dir, stats_every, histogram_every=histogram_every, **kwargs)

    def recorder(self, model, optimizer, scaler=None, step_number=None):
        """A Recorder on the framework's torch optimizer: its step hooks (and the closure it is
        given) mark the two measuring points, as in a plain loop; ``step_number`` gives the
        trainer's number of the step under way; ``scaler``: the trainer's GradScaler."""
        from gradexplorer.core.watch.recorder import Recorder

        return Recorder(model, optimizer, self.run_dir, stats_every=self.stats_every,
                        histogram_every=self.histogram_every, bins=self.bins,
                        snapshot_every=self.snapshot_every, hooks=self.hooks,
                        keep_snapshots=self.keep_snapshots, scaler=scaler,
                        step_number=step_number, overwrite=self.overwrite, resume=self.resume,
                        noise_every=self.noise_every)


def step_scalars(recorder) -> dict[str, float]:
    """The scalars of the recorder's last recorded step for a trainer's logger:
    ``gradexplorer/grad_norm`` (as applied), ``grad_norm_accumulated``, ``clip_coef`` and
    ``skipped`` (1.0 when the GradScaler skipped it); {} before the first one."""
    ledger = recorder.ledger if recorder is not None else None
    if ledger is None:
        return {}
    figures = {"grad_norm": ledger.grad_norm_applied,
               "grad_norm_accumulated": ledger.grad_norm_accumulated,
               "clip_coef": ledger.clip_coef, "skipped": float(bool(ledger.skipped))}
    return {f"gradexplorer/{k}": float(v) for k, v in figures.items() if v is not None}
