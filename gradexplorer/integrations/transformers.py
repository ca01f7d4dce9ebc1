"""A transformers ``TrainerCallback`` recording gradients with ``gradexplorer.watch``.

The recorder sits on the Trainer's torch optimizer (inside accelerate's wrapper), as in a plain
loop: the gradient *as accumulated* is read at the end of each backward (before the Trainer's
``clip_grad_norm_``), the gradient *as applied* in the optimizer's step pre-hook (after it).
Steps are numbered by ``state.global_step``; the loss of each micro-batch is the model output's
``loss`` (a forward hook, in training only); an fp16 run's GradScaler is accelerate's.
``log_scalars=True`` also puts the newest recorded step's global norms, clip coefficient and
skip (``step_scalars``) into each of the Trainer's training ``on_log`` logs: its
``state.log_history`` (trainer_state.json) and the callbacks after this one. The Trainer runs
its ``report_to`` callbacks (TensorBoard, wandb, MLflow…) before the ones it is given, so for
them to log the scalars too, put the callback first with ``callback.attach(trainer)`` instead
of ``callbacks=[callback]``.
"""

from __future__ import annotations

from pathlib import Path

from transformers import TrainerCallback

from gradexplorer.integrations.settings import WatchSettings, step_scalars


def output_loss(output):
    """The ``loss`` a transformers model's output carries, if any."""
    if isinstance(output, dict):
        return output.get("loss")
    return getattr(output, "loss", None)


class GradexplorerTrainerCallback(TrainerCallback):
    """``Trainer(..., callbacks=[GradexplorerTrainerCallback("runs/exp1")])``."""

    def __init__(self, run_dir: str | Path | None = None, *, stats_every: int = 1,
                 histogram_every: int = 1, bins: int = 64, snapshot_every: int | None = None,
                 hooks: dict[str, str] | None = None, keep_snapshots: int | None = None,
                 overwrite: bool = False, resume: bool = False, log_scalars: bool = False,
                 every: int | None = None, noise_every: int | str = "auto") -> None:
        self.settings = WatchSettings.of(
            "GradexplorerTrainerCallback", run_dir, stats_every, histogram_every, every,
            bins=bins, snapshot_every=snapshot_every, hooks=hooks, keep_snapshots=keep_snapshots,
            overwrite=overwrite, resume=resume, noise_every=noise_every)
        self.log_scalars = log_scalars
        self.recorder = None
        self._loss_hook = None

    def attach(self, trainer) -> GradexplorerTrainerCallback:
        """Adds this callback to ``trainer`` ahead of all its others, its ``report_to`` loggers
        included, so that they log the ``log_scalars`` figures as well. Returns the callback."""
        handler = trainer.callback_handler
        handler.callbacks = [self] + [c for c in handler.callbacks if c is not self]
        return self

    def _start(self, state, model, optimizer) -> None:
        import torch

        wrapper = optimizer
        optimizer = getattr(optimizer, "optimizer", optimizer)  # accelerate's wrapper
        self.recorder = self.settings.recorder(model, optimizer, getattr(wrapper, "scaler", None),
                                               lambda: state.global_step + 1)

        def note(module, args, output):
            loss = output_loss(output)
            if module.training and torch.is_grad_enabled() and hasattr(loss, "detach"):
                self.recorder.note_loss(loss.detach())

        self._loss_hook = model.register_forward_hook(note)

    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        if self.recorder is None and model is not None and optimizer is not None:
            self._start(state, model, optimizer)

    def on_step_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        if self.recorder is None and model is not None and optimizer is not None:
            self._start(state, model, optimizer)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.log_scalars and logs is not None and "loss" in logs:  # a training step's logs
            scalars = step_scalars(self.recorder)
            logs.update(scalars)
            if state.log_history:
                state.log_history[-1].update(scalars)

    def on_train_end(self, args, state, control, **kwargs):
        if self._loss_hook is not None:
            self._loss_hook.remove()
            self._loss_hook = None
        if self.recorder is not None:
            self.recorder.close()
