"""The independent reference for per-sample gradient norms: torch.func's per-sample gradients
(vmap of grad of each sample's own loss, through functional_call), in float64, reduced to
norms per module (a tied weight counted once, at the module that owns it first)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad, vmap


def reference_norms(model: nn.Module, loss_of, *inputs) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(each sample's total norm, {module name: each sample's norm}); ``loss_of(model_out,
    *sample_inputs)`` is one sample's loss (inputs batched along dimension 0)."""
    params = {n: p.detach() for n, p in model.named_parameters() if p.requires_grad}
    buffers = {n: b.detach() for n, b in model.named_buffers()}

    def one(ps, *sample):
        batched = [t.unsqueeze(0) for t in sample]
        return loss_of(lambda *args, **kw: functional_call(model, (ps, buffers), args, kw),
                       *batched)

    grads = vmap(grad(one), in_dims=(None, *[0] * len(inputs)), randomness="same")(params, *inputs)
    owners = owner_names(model)
    per_module: dict[str, torch.Tensor] = {}
    for name, g in grads.items():
        owner = owners[name]
        sq = g.double().pow(2).reshape(g.shape[0], -1).sum(1)
        per_module[owner] = per_module.get(owner, 0) + sq
    total = torch.stack(list(per_module.values())).sum(0).sqrt().numpy()
    return total, {n: v.sqrt().numpy() for n, v in per_module.items()}


def owner_names(model: nn.Module) -> dict[str, str]:
    """Parameter name (as named_parameters gives it) -> the module name it belongs to."""
    return {n: n.rpartition(".")[0] for n, _ in model.named_parameters()}
