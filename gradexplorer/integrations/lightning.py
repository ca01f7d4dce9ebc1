"""A Lightning ``Callback`` recording gradients with ``gradexplorer.watch``.

Lightning runs forward and backward inside ``optimizer.step(closure)``, so the optimizer's own
step hooks would see last step's gradients; this callback marks the boundaries with Lightning's
``on_before_optimizer_step`` (after backward, before the update) and ``on_train_batch_end``.
"""

from __future__ import annotations

from pathlib import Path

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # the older package name
    from pytorch_lightning.callbacks import Callback

from gradexplorer.integrations.settings import WatchSettings


class GradexplorerLightningCallback(Callback):
    """``Trainer(callbacks=[GradexplorerLightningCallback("runs/exp1")])``."""

    def __init__(self, run_dir: str | Path | None = None, *, every: int = 1, bins: int = 64,
                 snapshot_every: int | None = None, hooks: dict[str, str] | None = None,
                 keep_snapshots: int | None = None, overwrite: bool = False,
                 resume: bool = False) -> None:
        super().__init__()
        self.settings = WatchSettings(run_dir, every, bins, snapshot_every, hooks, keep_snapshots,
                                      overwrite, resume)
        self.recorder = None
        self._stepped = False

    def on_fit_start(self, trainer, pl_module) -> None:
        if len(trainer.optimizers) != 1:
            from gradexplorer.core.errors import UserError

            raise UserError("GradexplorerLightningCallback records one optimizer; "
                            f"this module has {len(trainer.optimizers)}")
        self.recorder = self.settings.recorder(pl_module, trainer.optimizers[0])

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        if self.recorder is not None:
            self.recorder.before_optimizer_step()
            self._stepped = True

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self.recorder is None or not self._stepped:
            return  # accumulating gradients: no optimizer step on this batch
        self._stepped = False
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        self.recorder.after_optimizer_step(loss=loss.detach() if hasattr(loss, "detach") else loss)

    def on_fit_end(self, trainer, pl_module) -> None:
        if self.recorder is not None:
            self.recorder.close()
