"""On the CPU the optimizer state is read in place by the Numba kernels (one call for every
norm, one for Adam's second-moment figures), and agrees with torch's float64 ops to the last
bits (the exact float64 references are tests/test_step_ledger.py's)."""

import math

import pytest
import torch
from torch import nn

from gradexplorer.core.stats import optimizer_state as S
from gradexplorer.core.stats.backends import warmup
from gradexplorer.core.stats.backends.numba import kernels_in_place as kernels_at


def trained(kind: str):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    opt = {"adam": lambda p: torch.optim.Adam(p, lr=0.01),
           "adamw-amsgrad": lambda p: torch.optim.AdamW(p, lr=0.003, amsgrad=True),
           "sgd-momentum": lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9)}[kind](model.parameters())
    for _ in range(3):
        nn.functional.mse_loss(model(torch.randn(8, 16)), torch.randn(8, 1)).backward()
        opt.step()
        opt.zero_grad()
    return model, opt


def torch_figures(opt, named) -> dict:
    """The same figures by torch's float64 ops (the path a device takes)."""
    out = {}
    for name, p in named:
        state, group = opt.state[p], opt.param_groups[0]
        figures = {"lr": group["lr"]}
        for field, key in S.NORMED:
            if field in state:
                figures[key] = torch.linalg.vector_norm(state[field], dtype=torch.float64).item()
        moment = S._second_moment_of(name, state, group, group["lr"])
        if moment is not None:
            figures.update({k: v.item() for k, v in S._figures(moment).items()})
        out[name] = figures
    return out


@pytest.mark.parametrize("kind", ["adam", "adamw-amsgrad", "sgd-momentum"])
def test_cpu_state_comes_from_the_kernels_and_agrees_with_torch(monkeypatch, kind):
    model, opt = trained(kind)
    named = list(model.named_parameters())
    # the kernels loaded first: until they are, the state is read by torch's ops, and the
    # warm-up's own pass (its thread) would call the kernel counted below
    warmup.ready()
    assert warmup.wait() and warmup.ready() is True
    calls = []
    kernel = kernels_at.second_moments_at
    monkeypatch.setattr(kernels_at, "second_moments_at", lambda *a: calls.append(a) or kernel(*a))
    states = S.optimizer_state(opt, named)
    assert len(calls) == (0 if kind == "sgd-momentum" else 1)  # one call for every parameter
    expected = torch_figures(opt, named)
    for name, figures in expected.items():
        assert len(figures) == (2 if kind == "sgd-momentum" else 4)
        for key, want in figures.items():
            got = getattr(states[name], key)
            assert math.isclose(got, want, rel_tol=1e-13), (name, key, got, want)
