"""A small model and the loop that trains it, for the tests that watch a run (Qt-free)."""

from __future__ import annotations

import torch
from torch import nn


def train(model, opt, steps, start=0):
    """``steps`` optimizer steps of ``model`` on fixed random batches (batch ``step`` each)."""
    for step in range(start, start + steps):
        x = torch.randn(16, 6, generator=torch.Generator().manual_seed(step))
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()


def clipped_run(path, steps: int = 6, max_norm: float = 0.1, optimizer=torch.optim.Adam):
    """The seeded 6 → 12 → 2 MLP under ``gradexplorer.watch`` in a plain loop clipping every
    step to ``max_norm`` (its loss ×100, so that clipping acts); the model and optimizer."""
    import gradexplorer as gx

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 2))
    opt = optimizer(model.parameters(), lr=0.01)
    with gx.watch(model, opt, path, bins=8):
        for step in range(steps):
            x = torch.randn(16, 6, generator=torch.Generator().manual_seed(step))
            opt.zero_grad()
            (model(x).square().mean() * 100).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            opt.step()
    return model, opt


def make():
    """A seeded 6 → 12 → 2 MLP and its SGD optimizer."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 2))
    return model, torch.optim.SGD(model.parameters(), lr=0.05)
