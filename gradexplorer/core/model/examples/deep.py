"""A deep, narrow residual MLP: a knob for backward graphs of any size."""

from __future__ import annotations

import torch
from torch import nn

from gradexplorer.core.model.examples.options import reject_unknown, take_int
from gradexplorer.core.model.workload import Workload


class ResidualBlock(nn.Module):
    """x + fc(relu(x))."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc(torch.relu(x))


class DeepMLP(nn.Module):
    """``blocks`` residual blocks between an input and an output layer."""

    def __init__(self, width: int, blocks: int) -> None:
        super().__init__()
        self.inp = nn.Linear(width, width)
        self.blocks = nn.Sequential(*(ResidualBlock(width) for _ in range(blocks)))
        self.out = nn.Linear(width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.blocks(self.inp(x)))


def build(options: dict[str, str], seed: int) -> Workload:
    """About 6 backward-graph nodes per block: ``blocks=2000`` gives ~12k nodes."""
    blocks = take_int(options, "blocks", 50, hi=200_000)
    width = take_int(options, "width", 8, hi=4096)
    batch = take_int(options, "batch", 4, hi=4096)
    reject_unknown(options, "deep", ("blocks", "width", "batch"))
    model = DeepMLP(width, blocks)
    for block in model.blocks:  # keep the residual stream tame at any depth
        nn.init.normal_(block.fc.weight, std=0.5 / (width * max(1.0, blocks)) ** 0.5)
        nn.init.zeros_(block.fc.bias)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, width, generator=gen)
    target = torch.randn(batch, 1, generator=gen)
    return Workload(
        model=model,
        make_batch=lambda step: (x, target),
        loss_fn=nn.MSELoss(),
        name="deep",
        description=f"residual MLP with {blocks} blocks of width {width}",
    )
