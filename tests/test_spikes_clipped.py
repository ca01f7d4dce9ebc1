"""Spike detection on a loop that clips: it follows the global norm as accumulated (before
``clip_grad_norm_``), not the applied one, which clipping holds at ``max_norm``."""

import math

import numpy as np
import torch
from torch import nn

import gradexplorer as gx

INJECT, JUMP = 60, 18.0


def clipped_run(path, steps: int):
    """A loop clipping every step to 1.0 (its gradient's norm is always above it); at step
    INJECT the loss, so the gradient as accumulated, is multiplied by JUMP."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    with gx.watch(model, opt, path, bins=8):
        for step in range(1, steps + 1):
            x = torch.randn(32, 8, generator=g)
            opt.zero_grad()
            loss = (model(x) - 3.0).square().mean() * 50
            (loss * (JUMP if step == INJECT else 1.0)).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            opt.step()


def test_a_jump_of_the_accumulated_norm_under_clipping_is_flagged_at_its_size(tmp_path):
    clipped_run(tmp_path / "run", INJECT + 10)
    run = gx.open_run(tmp_path / "run")
    ledgers = {led.optimizer_step: led for led in run.ledger()}
    assert all(led.clipped for led in ledgers.values())  # the applied norm is 1.0 throughout
    applied = [ledgers[s].grad_norm_applied for s in sorted(ledgers)]
    assert max(abs(a - 1.0) for a in applied) < 1e-5
    accumulated = np.array([ledgers[s].grad_norm_accumulated for s in range(1, INJECT + 1)])
    events = run.spike_events()
    assert [e.step for e in events] == [INJECT]
    # the factor: the step's accumulated norm over its band's centre (the median of the
    # logarithms of the steps before it), computed here in float64
    centre = math.exp(float(np.median(np.log(accumulated[:-1]))))
    factor = accumulated[-1] / centre
    assert factor > 10
    assert f"global norm at ×{factor:.3g} its band's median at step {INJECT}" in events[0].reasons
    kept = events[0].figures
    assert kept["global norm"] == [ledgers[s].grad_norm_accumulated for s in kept["steps"]]
