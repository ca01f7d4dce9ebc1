"""The optimizer's own state per parameter, read after a step, in float64.

For any optimizer whose state holds ``exp_avg`` and ``exp_avg_sq`` (Adam, AdamW, NAdam, RAdam,
...): ‖m‖, the RMS of √v̂ with v̂ = v / (1 − β₂ᵗ) the bias-corrected second moment (that is
√mean(v̂)), and the effective step size: the mean over the parameter's elements of
lr / (√v̂ + ε), the learning rate Adam's update gives each element (with ``amsgrad`` the
running maximum of v is used, as Adam does). For SGD with momentum: ‖momentum buffer‖. Every
parameter gets its group's learning rate. A figure the optimizer has no state for is None.
"""

from __future__ import annotations

import torch
from torch import nn

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


def _figures(state: dict, group: dict, lr: float) -> dict[str, torch.Tensor]:
    """The second-moment figures of one parameter's state, float64, queued on its device (the
    norms are taken for every parameter at once in ``optimizer_state``)."""
    out = {}
    v = state.get("exp_avg_sq")
    if isinstance(v, torch.Tensor) and v.numel():
        v_hat = v.detach().double() / _bias_correction(state, group)
        out["exp_avg_sq_rms"] = v_hat.mean().sqrt()
        denom = _second_moment(state, group).detach().double() / _bias_correction(state, group)
        eps = float(group.get("eps", 0.0) or 0.0)
        out["effective_lr"] = (lr / (denom.sqrt_() + eps)).mean()
    return out


def optimizer_state(optimizer: torch.optim.Optimizer,
                    named: list[tuple[str, nn.Parameter]]) -> dict[str, ParamOptimState]:
    """``name -> ParamOptimState`` of every parameter ``optimizer`` holds (the norms of every
    parameter's momentum or first moment in one foreach op per (device, dtype); one transfer
    per device for all the figures)."""
    from gradexplorer.core.stats.accumulated import grad_norms

    lrs = [_number(g.get("lr")) for g in optimizer.param_groups]
    group_of = {id(p): (g, lr) for g, lr in zip(optimizer.param_groups, lrs, strict=True)
                for p in g["params"]}
    states: dict[str, ParamOptimState] = {}
    queued: dict[torch.device, list[tuple[str, str, torch.Tensor]]] = {}
    normed: list[tuple[str, str, torch.Tensor]] = []
    for name, p in named:
        group, lr = group_of.get(id(p), (None, None))
        if group is None:
            continue
        states[name] = ParamOptimState(name, lr)
        state = optimizer.state.get(p)
        if not state:
            continue
        normed += [(name, key, t.detach()) for field, key in NORMED
                   if isinstance(t := state.get(field), torch.Tensor) and t.numel()]
        if "exp_avg_sq" in state:
            for key, value in _figures(state, group, lr or 0.0).items():
                queued.setdefault(value.device, []).append((name, key, value))
    norms = grad_norms([t for _, _, t in normed], numba=False)  # float64 foreach norms
    for device in set(queued) | ({norms.device} if norms is not None else set()):
        items = queued.get(device, [])
        keys = [(name, key) for name, key, _ in items]
        parts = [torch.stack([v for _, _, v in items])] if items else []
        if norms is not None and norms.device == device:
            keys += [(name, key) for name, key, _ in normed]
            parts.append(norms)
        for (name, key), value in zip(keys, torch.cat(parts).cpu().tolist(), strict=True):
            setattr(states[name], key, value)
    return states
