"""The optimizer's own state per parameter, read after a step, in float64.

For any optimizer whose state holds ``exp_avg`` and ``exp_avg_sq`` (Adam, AdamW, NAdam, RAdam,
...): ‖m‖, the RMS of √v̂ with v̂ = v / (1 − β₂ᵗ) the bias-corrected second moment (that is
√mean(v̂)), and the effective step size: the mean over the parameter's elements of
lr / (√v̂ + ε), the learning rate Adam's update gives each element (with ``amsgrad`` the
running maximum of v is used, as Adam does). For SGD with momentum: ‖momentum buffer‖. Every
parameter gets its group's learning rate. A figure the optimizer has no state for is None.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from gradexplorer.core.stats.measured import measured_tensor
from gradexplorer.core.stats.optimizer_fields import (  # noqa: F401 - re-exported
    STATE_FIELDS,
    STATE_LABELS,
    ParamOptimState,
    state_from_row,
)


def _number(value) -> float | None:
    if value is None:
        return None
    return float(value.item() if isinstance(value, torch.Tensor) else value)


def _bias_correction(state: dict, group: dict) -> float:
    betas, step = group.get("betas"), _number(state.get("step"))
    if not betas or not step:
        return 1.0
    return 1.0 - float(betas[1]) ** step


def _second_moment(state: dict, group: dict) -> torch.Tensor:
    if group.get("amsgrad") and state.get("max_exp_avg_sq") is not None:
        return state["max_exp_avg_sq"]
    return state["exp_avg_sq"]


NORMED = (("exp_avg", "exp_avg_norm"), ("momentum_buffer", "momentum_norm"))  # state → ‖·‖ figure


@dataclass
class _SecondMoment:
    """What Adam's second-moment figures of one parameter are computed from."""

    name: str
    v: torch.Tensor  # exp_avg_sq
    w: torch.Tensor  # the second moment the update divides by (max_exp_avg_sq with amsgrad)
    bc: float  # the bias correction 1 − β₂ᵗ
    lr: float
    eps: float


def _second_moment_of(name: str, state: dict, group: dict, lr: float) -> _SecondMoment | None:
    v = state.get("exp_avg_sq")
    if not isinstance(v, torch.Tensor) or not v.numel():
        return None
    return _SecondMoment(name, measured_tensor(v), measured_tensor(_second_moment(state, group)),
                         _bias_correction(state, group), lr, float(group.get("eps", 0.0) or 0.0))


def _figures(m: _SecondMoment) -> dict[str, torch.Tensor]:
    """The second-moment figures of one parameter's state, float64, queued on its device."""
    v_hat = m.v.double() / m.bc
    denom = m.w.double() / m.bc
    return {"exp_avg_sq_rms": v_hat.mean().sqrt(), "effective_lr": (m.lr / (denom.sqrt_() + m.eps)).mean()}


def _set_second_moments(states: dict[str, ParamOptimState], moments: list[_SecondMoment]) -> None:
    """RMS √v̂ and the effective lr into ``states``: one kernel call on the CPU, else the
    torch ops queued on each device and one transfer per device."""
    found = None
    if moments:
        from gradexplorer.core.stats.backends.registry import cpu_second_moments
        found = cpu_second_moments([m.v for m in moments], [m.w for m in moments],
                                   [m.bc for m in moments], [m.lr for m in moments],
                                   [m.eps for m in moments])
    if found is not None:
        for m, (rms, effective) in zip(moments, found.tolist(), strict=True):
            states[m.name].exp_avg_sq_rms, states[m.name].effective_lr = rms, effective
        return
    queued: dict[torch.device, list[tuple[str, str, torch.Tensor]]] = {}
    for m in moments:
        for key, value in _figures(m).items():
            queued.setdefault(value.device, []).append((m.name, key, value))
    for items in queued.values():
        values = torch.stack([v for _, _, v in items]).cpu().tolist()
        for (name, key, _), value in zip(items, values, strict=True):
            setattr(states[name], key, value)


def _set_norms(states: dict[str, ParamOptimState], normed: list[tuple[str, str, torch.Tensor]]) -> None:
    """‖m‖ and ‖momentum‖ into ``states``: ``grad_norms`` (the Numba kernel on the CPU, a
    foreach norm per (device, dtype) on a device; float64 either way)."""
    from gradexplorer.core.steps.accumulated import grad_norms

    norms = grad_norms([t for _, _, t in normed])
    if norms is None:
        return
    values = norms.tolist() if isinstance(norms, np.ndarray) else norms.cpu().tolist()
    for (name, key, _), value in zip(normed, values, strict=True):
        setattr(states[name], key, value)


def optimizer_state(optimizer: torch.optim.Optimizer, named: list[tuple[str, nn.Parameter]],
                    lrs: list[float | None] | None = None,
                    known: dict | None = None) -> dict[str, ParamOptimState]:
    """``name -> ParamOptimState`` of every parameter ``optimizer`` holds: on the CPU one
    Numba call for every norm and one for every second-moment figure, reading the states in
    place; on a device a fixed number of ops per (device, dtype) and one transfer per device.
    ``lrs``: each group's learning rate as the step used it (read now where not given: a
    scheduler changes it after the step). ``known``: ``{id(t): (t, ‖t‖)}`` of state tensors
    already measured since the step (``GradientMonitor.found_state_norms``: read with the
    update ratio), taken as they are."""
    if lrs is None:
        lrs = [_number(g.get("lr")) for g in optimizer.param_groups]
    group_of = {id(p): (g, lr) for g, lr in zip(optimizer.param_groups, lrs, strict=True)
                for p in g["params"]}
    states: dict[str, ParamOptimState] = {}
    normed: list[tuple[str, str, torch.Tensor]] = []
    moments: list[_SecondMoment] = []
    for name, p in named:
        group, lr = group_of.get(id(p), (None, None))
        if group is None:
            continue
        states[name] = ParamOptimState(name, lr)
        state = optimizer.state.get(p)
        if not state:
            continue
        for field, key in NORMED:
            t = state.get(field)
            if isinstance(t, torch.Tensor) and t.numel():
                seen = known.get(id(t)) if known else None
                if seen is not None and seen[0] is t:  # the very tensor, read since the step
                    setattr(states[name], key, seen[1])
                else:
                    normed.append((name, key, t.detach()))
        if (moment := _second_moment_of(name, state, group, lr or 0.0)) is not None:
            moments.append(moment)
    _set_norms(states, normed)
    _set_second_moments(states, moments)
    return states
