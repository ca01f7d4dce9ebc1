"""Run directories for the export and report tests: a real model trained under watch."""

from __future__ import annotations

import warnings
from pathlib import Path

import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.session import MonitorWarning


def write_run(path: Path, steps: int = 6, nan_at: int | None = None, bins: int = 16,
              lr: float = 0.1, seed: int = 0, hooks: dict[str, str] | None = None) -> Path:
    """A small MLP trained ``steps`` steps under ``gx.watch`` (loss recorded); at step
    ``nan_at`` one element of ``0.weight``'s gradient is made NaN and one of ``2.bias``'s +Inf."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 3))
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    with warnings.catch_warnings(), gx.watch(model, opt, path, bins=bins, hooks=hooks) as rec:
        # the NaN step writes .grad after the backward, which watch says (one MonitorWarning)
        warnings.filterwarnings("ignore", ".*grad was written between", MonitorWarning)
        for step in range(1, steps + 1):
            x = torch.randn(8, 6, generator=torch.Generator().manual_seed(step))
            opt.zero_grad()
            loss = model(x).square().mean()
            loss.backward()
            if step == nan_at:
                model[0].weight.grad[0, 0] = float("nan")
                model[2].bias.grad[1] = float("inf")
            rec.note_loss(loss)
            opt.step()
            if step == nan_at:  # keep later steps finite
                with torch.no_grad():
                    model[0].weight[0, 0] = 0.1
                    model[2].bias[1] = 0.0
    return path


def recorded_history(layers: int = 8, steps: int = 5, nan_layer: int | None = 3):
    """A real MLP trained under watch (in memory); layer ``nan_layer``'s weight gets one NaN
    gradient element at the last step."""
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(6, 6) for _ in range(layers)])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    rec = gx.watch(model, opt, bins=16)
    rec.monitor.history.__init__(maxlen=64)
    for step in range(steps):
        opt.zero_grad()
        model(torch.randn(4, 6, generator=torch.Generator().manual_seed(step))).square().mean().backward()
        if nan_layer is not None and step == steps - 1:
            model[nan_layer].weight.grad[0, 0] = float("nan")
        opt.step()
    rec.close()
    return rec.monitor.history
