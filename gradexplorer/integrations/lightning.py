"""A Lightning ``Callback`` recording gradients with ``gradexplorer.watch``.

The recorder sits on the torch optimizer itself, as in a plain loop: Lightning runs forward,
backward, ``on_before_optimizer_step`` and gradient clipping inside ``optimizer.step(closure)``,
so the gradient *as applied* is measured after that closure (after clipping) and the gradient
*as accumulated* at the end of the last backward (before clipping). Steps are numbered by
``trainer.global_step``; each micro-batch's loss comes from ``on_before_backward`` (times
``accumulate_grad_batches``, which Lightning divided it by); a ``16-mixed`` run's GradScaler is
found on the precision plugin (Lightning hands ``on_before_backward`` the scaled loss there:
it is divided by the scale, on the device, before it is noted). ``log_scalars=True`` also logs
each recorded step's global norms, clip coefficient and skip (``step_scalars``) to every one of
the Trainer's own loggers, once, at Lightning's logging step of that batch (global_step - 1).
"""

from __future__ import annotations

from pathlib import Path

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # the older package name
    from pytorch_lightning.callbacks import Callback

from gradexplorer.integrations.settings import WatchSettings, step_scalars


class GradexplorerLightningCallback(Callback):
    """``Trainer(callbacks=[GradexplorerLightningCallback("runs/exp1")])``."""

    def __init__(self, run_dir: str | Path | None = None, *, stats_every: int = 1,
                 histogram_every: int = 1, bins: int = 64, snapshot_every: int | None = None,
                 hooks: dict[str, str] | None = None, keep_snapshots: int | None = None,
                 overwrite: bool = False, resume: bool = False, log_scalars: bool = False,
                 every: int | None = None, noise_every: int | str = "auto") -> None:
        super().__init__()
        self.settings = WatchSettings.of(
            "GradexplorerLightningCallback", run_dir, stats_every, histogram_every, every,
            bins=bins, snapshot_every=snapshot_every, hooks=hooks, keep_snapshots=keep_snapshots,
            overwrite=overwrite, resume=resume, noise_every=noise_every)
        self.log_scalars, self._logged = log_scalars, None
        self.recorder = None

    def on_fit_start(self, trainer, pl_module) -> None:
        if len(trainer.optimizers) != 1:
            from gradexplorer.core.messages.errors import UserError

            raise UserError("GradexplorerLightningCallback records one optimizer; "
                            f"this module has {len(trainer.optimizers)}")
        scaler = getattr(getattr(trainer, "precision_plugin", None), "scaler", None)
        self.recorder = self.settings.recorder(pl_module, trainer.optimizers[0], scaler,
                                               lambda: trainer.global_step + 1)

    def on_before_backward(self, trainer, pl_module, loss) -> None:
        if self.recorder is None or not hasattr(loss, "detach"):
            return
        loss = loss.detach() * max(1, trainer.accumulate_grad_batches)
        scale = self.recorder.scaler.scale() if self.recorder.scaler is not None else None
        self.recorder.note_loss(loss if scale is None else loss / scale.to(loss.device))

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        ledger = self.recorder.ledger if self.recorder is not None else None
        if self.log_scalars and ledger is not None and ledger.optimizer_step != self._logged:
            self._logged = ledger.optimizer_step  # once per recorded step
            for logger in trainer.loggers:  # Lightning numbers a batch's metrics from 0
                logger.log_metrics(step_scalars(self.recorder), step=ledger.optimizer_step - 1)

    def on_fit_end(self, trainer, pl_module) -> None:
        if self.recorder is not None:
            self.recorder.close()
