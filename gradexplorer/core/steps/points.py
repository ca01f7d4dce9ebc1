"""Where a recorder measures an optimizer step, whatever drives it.

- ``with_closure``: ``optimizer.step(closure)`` (SGD with a closure, LBFGS, Lightning) runs the
  step pre-hooks *before* the closure computes this step's gradients; the pre-hook hands the
  optimizer a closure that measures after each evaluation instead (the last one counts).
- ``ScalerWatch``: a GradScaler skips ``optimizer.step()`` when it finds Inf or NaN, so no
  optimizer hook fires; its ``step`` method is wrapped (on the instance, undone on close) to
  notice the skip, and its scale is read at the step. A fused optimizer (fused Adam, AdamW,
  SGD: ``_step_supports_amp_scaling``, the Hugging Face Trainer's default) is stepped all the
  same and skips the update inside its kernel: the ``found_inf`` the scaler hands it for the
  step tells (``fused_skip``).
- ``step_ledger``: the StepLedger of a measured step from the two points.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import compress
from typing import Any

import numpy as np
import torch

from gradexplorer.core.messages.errors import measured
from gradexplorer.core.stats.records import StepGradients
from gradexplorer.core.steps.accumulated import AccumulatedNorms
from gradexplorer.core.steps.ledger import StepLedger, clip_coefficient, mean_loss, norm_of


def _closure_index(args: tuple) -> int | None:
    """Where the closure is in a step pre-hook's ``args`` (which start with the optimizer)."""
    start = 1 if args and isinstance(args[0], torch.optim.Optimizer) else 0
    return start if len(args) > start and callable(args[start]) else None


def guarded(what: str, work: Callable[[], Any], warned: set, default: Any = None,
            step: int | None = None) -> Any:
    """``work()``; where it raises, ``default`` and ``measured``'s one RuntimeWarning per
    ``what`` and cause (naming the first ``step`` it happened at): the step points never break
    the loop."""
    found, cause = measured(what, work, warned, "" if step is None else f" at step {step}")
    return default if cause is not None else found


def closure_of(args: tuple, kwargs: dict) -> Callable | None:
    """The closure passed to ``optimizer.step``, if any."""
    if kwargs.get("closure") is not None:
        return kwargs["closure"]
    index = _closure_index(args or ())
    return None if index is None else args[index]


def with_closure(args: tuple, kwargs: dict, after: Callable[[Any], None]) -> tuple[tuple, dict]:
    """``(args, kwargs)`` for ``optimizer.step`` with its closure calling ``after(loss)`` once
    each evaluation has run (its backward, and any clipping done inside it)."""
    closure = closure_of(args, kwargs)

    def measured_closure():
        result = closure()
        after(result)  # ``after`` guards itself: the closure's result always comes back
        return result

    if kwargs.get("closure") is not None:
        return args, {**kwargs, "closure": measured_closure}
    index = _closure_index(args)
    return (*args[:index], measured_closure, *args[index + 1:]), kwargs


def optimizer_of(optimizer: Any) -> Any:
    """The torch optimizer inside a wrapper (accelerate's AcceleratedOptimizer, Lightning's)."""
    return getattr(optimizer, "optimizer", optimizer)


class ScalerWatch:
    """A GradScaler's scale at each step, and its skipped steps (``on_skip(found_inf)``)."""

    def __init__(self, scaler, optimizer, on_skip: Callable[[], None], steps_taken) -> None:
        self.scaler, self.optimizer = scaler, optimizer
        self._original = None
        if scaler is None:
            return
        if not callable(getattr(scaler, "step", None)) or not hasattr(scaler, "is_enabled"):
            from gradexplorer.core.messages.errors import UserError

            raise UserError(f"watch: scaler must be a torch.amp.GradScaler, "
                            f"got {type(scaler).__name__}")
        original = scaler.step

        def step(optimizer, *args, **kwargs):
            before = steps_taken()
            out = original(optimizer, *args, **kwargs)
            if optimizer_of(optimizer) is self.optimizer and steps_taken() == before:
                on_skip()  # guards itself
            return out

        self._original = original
        scaler.step = step

    def fused_skip(self, optimizer) -> bool:
        """Whether a fused optimizer's step, under way, is one the scaler skips (Inf/NaN found);
        read after the step's figures, whose transfer has waited for the device already."""
        found = getattr(optimizer, "found_inf", None) if self.scaler is not None else None
        return isinstance(found, torch.Tensor) and bool(found.sum().item() > 0)

    def scale(self) -> torch.Tensor | None:
        """The scale now (a copy on the device, no transfer); None without an enabled scaler."""
        if self.scaler is None or not self.scaler.is_enabled():
            return None
        scale = getattr(self.scaler, "_scale", None)
        if isinstance(scale, torch.Tensor):
            return scale.detach().clone()
        return torch.tensor(float(self.scaler.get_scale()), dtype=torch.float64)

    def remove(self) -> None:
        if self._original is not None:
            try:
                del self.scaler.step  # the class's own method again
            except AttributeError:
                self.scaler.step = self._original
            self._original = None


SKIP_REASON = "GradScaler found Inf/NaN gradients; optimizer.step() not called"
FUSED_SKIP_REASON = "GradScaler found Inf/NaN gradients; the fused optimizer left the weights unchanged"


def skip_line(step: int, record) -> str:
    """The warning for a step the GradScaler skipped, naming where the gradient is not finite."""
    bad = record.nonfinite() if record is not None else {}
    where = ", ".join(f"{n} ({s.nan_count} NaN, {s.inf_count} Inf)"
                      for n, s in list(bad.items())[:3]) or "no parameter named"
    return (f"gradexplorer: step {step} skipped by the GradScaler: non-finite gradients in "
            f"{where}{' ...' if len(bad) > 3 else ''}")


def accumulated_by_name(accum: AccumulatedNorms | None, names: list[str],
                        record: StepGradients | None = None) -> dict[str, float]:
    """``name -> ‖.grad‖`` as accumulated (parameters with a gradient only). With ``reuse``
    (the step's gradients are provably the tensors backward left) they are the applied point's
    norms from ``record``; a step measured at both points tells the probe what the applied one
    found (``accum.check``)."""
    if accum is None:
        return {}
    if len(names) != len(accum.present):
        raise ValueError(f"{len(accum.present)} parameters probed, {len(names)} named")
    held = names if all(accum.present) else list(compress(names, accum.present))
    if accum.reuse or accum.check is not None:
        norms = record.column("norm") if record is not None else {}
        try:
            applied = list(map(norms.__getitem__, held))
        except KeyError:  # a parameter the applied point did not record
            applied = [None]
        known = None not in applied
        if accum.check is not None and accum.check(np.array(applied, np.float64) if known
                                                   else None):
            return dict(zip(held, applied, strict=True))  # the same tensors, norms that agree
        if accum.reuse:
            return dict(zip(held, applied, strict=True)) if known else {}
    if accum.norms is None:
        return {}
    return dict(zip(held, accum.host().tolist(), strict=True))


def step_ledger(step: int, record: StepGradients | None, accumulated: dict[str, float],
                scale: float | None, losses: list[float], micro_batches: int | None,
                iteration: int | None, lrs: tuple[float, ...] | None,
                skipped: str | None = None) -> StepLedger:
    """The ledger row of one step: ``record`` is the applied point's figures (for a skipped
    step, the figures of the gradient it refused); ``skipped`` the reason when it was."""
    acc = norm_of(accumulated.values()) if accumulated else None
    applied = None if record is None or skipped else record.global_norm
    coef, clipped = clip_coefficient(acc, applied, scale)
    nans, infs = record.nonfinite_totals() if record else (0, 0)
    return StepLedger(step, iteration, micro_batches, mean_loss(losses), acc, applied,
                      coef, clipped, scale, skipped is not None, skipped, nans, infs, lrs)


def group_lrs(optimizer) -> tuple[float, ...] | None:
    """The learning rate of each parameter group."""
    if optimizer is None:
        return None
    return tuple(float(g["lr"]) for g in optimizer.param_groups)
