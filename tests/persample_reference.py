"""The independent reference for per-sample gradient norms: torch.func's per-sample gradients
(vmap of grad of each sample's own loss, through functional_call), in float64, reduced to
norms per module (a tied weight counted once, at the module that owns it first); and the
per-sample tests' set-up: float64 throughout (``float64``, an autouse fixture where imported),
the tracker's figures of one backward (``measured``) and their comparison (``assert_close``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from gradexplorer.core.persample.tracker import PerSampleNorms

TOL = 1e-6


@pytest.fixture(autouse=True)
def float64():
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    torch.manual_seed(0)
    yield
    torch.set_default_dtype(before)


def measured(model, loss_of, *inputs, reduction="mean"):
    tracker = PerSampleNorms(model, reduction)
    try:
        loss_of(model, *inputs).backward()
        return tracker, tracker.take()
    finally:
        tracker.remove()


def assert_close(got, model, loss_of, *inputs, modules=None):
    total, per_module = reference_norms(model, loss_of, *inputs)
    names = modules if modules is not None else list(per_module)
    assert sorted(got.modules) == sorted(names)
    for name in names:
        np.testing.assert_allclose(got.modules[name], per_module[name], rtol=TOL, atol=0)
    expected = np.sqrt(sum(per_module[n] ** 2 for n in names))
    np.testing.assert_allclose(got.norms, expected, rtol=TOL, atol=0)
    if modules is None:
        np.testing.assert_allclose(got.norms, total, rtol=TOL, atol=0)


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
