"""The step ledger: what happened at each optimizer step, from the two measuring points.

*As accumulated*: ``.grad`` after the last backward before the step (before
``GradScaler.unscale_`` and clipping). *As applied*: the gradient the optimizer uses (after
them). Their ratio, once the scale is divided out, is the clip coefficient; nobody has to
declare the clip. A step the GradScaler skips is a row with ``skipped`` set, never a gap.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields

import numpy as np

CLIP_TOLERANCE = 1e-6  # applied below accumulated/scale by more than this (relative): clipped
LEDGER_FIELDS = ("iteration", "micro_batches", "loss", "grad_norm_accumulated",
                 "grad_norm_applied", "clip_coef", "clipped", "scale", "skipped", "skip_reason",
                 "nan_count", "inf_count", "lr")


@dataclass
class StepLedger:
    """One optimizer step.

    ``iteration``: backward passes since recording began, this step's last one included;
    ``micro_batches``: backward passes since the previous step; ``loss``: the mean of the losses
    noted for this step's micro-batches (None when none was noted); ``grad_norm_accumulated``:
    global L2 norm of ``.grad`` after the last backward (still multiplied by ``scale``);
    ``grad_norm_applied``: global norm of the gradient the optimizer used (None when skipped);
    ``clip_coef``: applied / (accumulated / scale), 1.0 when nothing was clipped;
    ``clipped``: the clip coefficient is below 1 (beyond float rounding); ``scale``: the
    GradScaler's scale at the step, None without one; ``skipped``/``skip_reason``: the
    optimizer did not step (the GradScaler found Inf or NaN); ``nan_count``/``inf_count``:
    non-finite gradient values at the step; ``lr``: the learning rate of each parameter group.
    """

    optimizer_step: int
    iteration: int | None = None
    micro_batches: int | None = None
    loss: float | None = None
    grad_norm_accumulated: float | None = None
    grad_norm_applied: float | None = None
    clip_coef: float | None = None
    clipped: bool | None = None
    scale: float | None = None
    skipped: bool = False
    skip_reason: str | None = None
    nan_count: int = 0
    inf_count: int = 0
    lr: tuple[float, ...] | None = None

    def as_dict(self) -> dict:
        out = asdict(self)
        out["lr"] = None if self.lr is None else list(self.lr)
        return out


def norm_of(norms: Iterable[float]) -> float | None:
    """Global L2 norm from per-parameter norms (scaled: no overflow while it fits a float64),
    in Python floats: the arithmetic of ``records.global_norm`` (a step's applied norm), so an
    unclipped step's accumulated and applied norms agree to the bit, and no numpy call for a
    handful of numbers."""
    norms = [float(n) for n in norms]
    if not norms:
        return None
    if any(map(math.isnan, norms)):
        return math.nan
    top = max(norms)
    if top == 0 or not math.isfinite(top):
        return top
    return top * math.sqrt(sum([(n / top) ** 2 for n in norms]))


def clip_coefficient(accumulated: float | None, applied: float | None,
                     scale: float | None) -> tuple[float | None, bool | None]:
    """(applied / (accumulated / scale), clipped) — (None, None) when either is unknown or
    not finite; 1.0 when both are zero."""
    if accumulated is None or applied is None:
        return None, None
    true_norm = accumulated / scale if scale else accumulated
    if not (math.isfinite(true_norm) and math.isfinite(applied)):
        return None, None
    if true_norm == 0:
        return (1.0, False) if applied == 0 else (None, None)
    coef = applied / true_norm
    return coef, coef < 1.0 - CLIP_TOLERANCE


def mean_loss(losses: Sequence[float]) -> float | None:
    """The step's loss: the mean of its micro-batches' noted losses."""
    return float(np.mean(losses)) if losses else None


def ledger_from_row(step: int, row: dict) -> StepLedger:
    """A StepLedger from stored columns (missing ones default)."""
    known = {f.name for f in fields(StepLedger)} - {"optimizer_step"}
    values = {k: row[k] for k in known if k in row}
    for flag in ("clipped", "skipped"):
        if values.get(flag) is not None:
            values[flag] = bool(values[flag])
    if values.get("lr") is not None:
        values["lr"] = tuple(values["lr"])
    if values.get("skipped") is None:
        values["skipped"] = False
    for count in ("nan_count", "inf_count"):
        if values.get(count) is None:
            values[count] = 0
    return StepLedger(step, **values)


def rolling_summary(ledgers: Sequence[StepLedger], window: int = 100) -> dict:
    """Over the last ``window`` steps: ``clip_rate`` (share of applied steps that were clipped,
    None when none is known), ``skipped`` (count), ``steps`` (how many were looked at)."""
    recent = list(ledgers)[-window:]
    known = [led.clipped for led in recent if not led.skipped and led.clipped is not None]
    return {"clip_rate": (sum(known) / len(known)) if known else None,
            "skipped": sum(led.skipped for led in recent), "steps": len(recent)}


def fill_session_ledger(ledger: StepLedger | None, norm: float | None) -> None:
    """A TrainingSession's ledger whose norms the monitor measured (the session's own norm is
    off): the session neither scales nor clips, so the gradient measured after backward is
    both the accumulated and the applied one."""
    if ledger is None or norm is None or ledger.grad_norm_accumulated is not None \
            or ledger.grad_norm_applied is not None:
        return
    ledger.grad_norm_accumulated = ledger.grad_norm_applied = norm
    ledger.clip_coef, ledger.clipped = clip_coefficient(norm, norm, ledger.scale)


def headline_norm(ledger: StepLedger | None, applied: float | None = None) -> float | None:
    """The global norm the curves and spike detection follow: as accumulated, divided by the
    GradScaler's scale (what backward produced, before clipping: a clipped run's applied norm
    sits at ``max_norm`` whatever the gradient did), else as applied (the ledger's, or
    ``applied`` where there is no ledger)."""
    if ledger is None:
        return applied
    if ledger.grad_norm_accumulated is None:
        return applied if ledger.grad_norm_applied is None else ledger.grad_norm_applied
    return ledger.grad_norm_accumulated / ledger.scale if ledger.scale else ledger.grad_norm_accumulated


def _column(values, size: int) -> tuple[np.ndarray, np.ndarray]:
    """A step figure's values (a list with None where a step has none) as floats, and which
    steps have one."""
    if values is None:
        return np.full(size, math.nan), np.zeros(size, dtype=bool)
    floats = np.array(values, dtype=np.float64)  # None: NaN
    if None not in values:
        return floats, np.ones(size, dtype=bool)
    return floats, np.fromiter(map(operator.is_not, values, itertools.repeat(None)), dtype=bool, count=size)


def headline_series(figures: dict, size: int) -> np.ndarray:
    """``headline_norm`` of every step of a run's step figures (``RunHistory.step_figures``):
    as accumulated ÷ the GradScaler's scale where the step's ledger has it, else as applied;
    NaN where neither is known."""
    accumulated, has_accumulated = _column(figures.get("grad_norm_accumulated"), size)
    scale, has_scale = _column(figures.get("scale"), size)
    applied, _ = _column(figures.get("global_norm"), size)
    scaled = has_scale & (scale != 0)
    divided = np.divide(accumulated, scale, out=accumulated.copy(), where=scaled)
    return np.where(has_accumulated, divided, applied)
