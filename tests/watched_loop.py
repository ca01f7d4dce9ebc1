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


def make():
    """A seeded 6 → 12 → 2 MLP and its SGD optimizer."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 2))
    return model, torch.optim.SGD(model.parameters(), lr=0.05)
