"""A transformers ``TrainerCallback`` recording gradients with ``gradexplorer.watch``.

``on_pre_optimizer_step`` (gradients ready, clipping done) and ``on_optimizer_step`` mark each
step; the model and optimizer come from the Trainer.
"""

from __future__ import annotations

from pathlib import Path

from transformers import TrainerCallback

from gradexplorer.integrations.settings import WatchSettings


class GradexplorerTrainerCallback(TrainerCallback):
    """``Trainer(..., callbacks=[GradexplorerTrainerCallback("runs/exp1")])``."""

    def __init__(self, run_dir: str | Path | None = None, *, every: int = 1, bins: int = 64,
                 snapshot_every: int | None = None, hooks: dict[str, str] | None = None,
                 keep_snapshots: int | None = None, overwrite: bool = False,
                 resume: bool = False) -> None:
        self.settings = WatchSettings(run_dir, every, bins, snapshot_every, hooks, keep_snapshots,
                                      overwrite, resume)
        self.recorder = None

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        if self.recorder is None:
            optimizer = kwargs.get("optimizer")
            optimizer = getattr(optimizer, "optimizer", optimizer)  # accelerate's wrapper
            self.recorder = self.settings.recorder(kwargs["model"], optimizer)
        self.recorder.before_optimizer_step()

    def on_optimizer_step(self, args, state, control, **kwargs):
        if self.recorder is not None:
            self.recorder.after_optimizer_step()

    def on_train_end(self, args, state, control, **kwargs):
        if self.recorder is not None:
            self.recorder.close()
