"""Update-to-weight ratio ‖Δθ‖/‖θ‖ across ``optimizer.step()`` on the CPU, as cheaply as possible.

For ``torch.optim.SGD`` the step is known from what the optimizer keeps: with momentum (not
Nesterov) ``θ_after = θ_before − lr·buf``, without momentum or weight decay
``θ_after = θ_before ∓ lr·g``. One read of θ and of that direction after the step gives both
norms; no copy of the weights is needed. Any other optimizer (Adam, Nesterov, weight decay
without momentum) gets a copy of the weights before the step and a read of both after it.
"""

from __future__ import annotations

import numpy as np
import torch

from gradexplorer.core.stats import kernels as K
from gradexplorer.core.stats.backend_cpu import (
    SMALL,
    ParamCopies,
    concatenate,
    flat_array,
    in_parallel,
    offsets_of,
)

Rule = tuple[str, float] | None  # ("momentum_buffer" | "grad", sign) or None: copy


def step_rules(optimizer: torch.optim.Optimizer | None, params: list[torch.Tensor]) -> list[Rule]:
    """For each parameter, how its step can be read back after ``optimizer.step()``."""
    if type(optimizer) is not torch.optim.SGD:
        return [None] * len(params)
    group_of = {id(p): g for g in optimizer.param_groups for p in g["params"]}
    rules: list[Rule] = []
    for p in params:
        g = group_of.get(id(p))
        if g is None or g.get("nesterov"):
            rules.append(None)
        elif g["momentum"] > 0:
            rules.append(("momentum_buffer", float(g["lr"])))
        elif g["weight_decay"] == 0:
            rules.append(("grad", float(g["lr"]) * (-1.0 if g.get("maximize") else 1.0)))
        else:
            rules.append(None)
    return rules


class UpdateTracker:
    """``before(params, optimizer)`` ahead of the step, ``after(...)`` → (P, 2) squared norms."""

    def __init__(self) -> None:
        self.copies = ParamCopies()
        self._rules: list[Rule] = []
        self._copied: list[int] = []

    def before(self, params: list[torch.Tensor], optimizer=None) -> None:
        """Note how each step will be measured; copy the weights whose step cannot be read back."""
        self._rules = step_rules(optimizer, params)
        self._copied = [i for i, rule in enumerate(self._rules) if rule is None]
        self.copies.take([params[i] for i in self._copied])

    def after(self, params: list[torch.Tensor], optimizer=None) -> np.ndarray:
        """``(P, 2)``: ‖Δθ‖² and ‖θ_before‖² per parameter (NaN where it cannot be told)."""
        out = np.full((len(params), 2), np.nan)
        if self._copied:
            out[self._copied] = self.copies.update_norms([params[i] for i in self._copied])
        known = [(i, rule) for i, rule in enumerate(self._rules) if rule is not None]
        directions = {i: self._direction(params[i], source, optimizer) for i, (source, _) in known}
        readable = [(i, scale) for i, (_, scale) in known if directions[i] is not None]
        big = [(i, s) for i, s in readable if params[i].numel() >= SMALL]
        small = [(i, s) for i, s in readable if params[i].numel() < SMALL]

        def work(item):
            i, scale = item
            return K.step_norms(self.copies.view(params[i]), directions[i], scale)

        for (i, _), norms in zip(big, in_parallel(work, big, lambda it: params[it[0]].numel()),
                                 strict=True):
            out[i] = norms
        if small:
            thetas = [self.copies.view(params[i]) for i, _ in small]
            rows = np.zeros((len(small), 2))
            K.segment_step_norms(
                concatenate(thetas), concatenate([directions[i] for i, _ in small]),
                np.array([s for _, s in small]), offsets_of([t.size for t in thetas]), rows,
            )
            out[[i for i, _ in small]] = rows
        return out

    def _direction(self, p: torch.Tensor, source: str, optimizer) -> np.ndarray | None:
        direction = p.grad if source == "grad" else optimizer.state[p].get(source)
        if direction is None or direction.shape != p.shape or direction.is_sparse:
            return None
        if direction.dtype != p.dtype:
            return flat_array(direction.to(p.dtype))
        # a momentum buffer lives across steps: keep its view like the weights'
        return flat_array(direction) if source == "grad" else self.copies.view(direction)
