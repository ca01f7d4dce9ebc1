"""A deep, narrow residual MLP: a knob for backward graphs of any size."""

from __future__ import annotations

import torch
from torch import nn

from gradexplorer.core.model.examples.options import reject_unknown, take_int
from gradexplorer.core.model.workload import Workload


class ScaledLinear(nn.Linear):
    """``scale * linear(x)`` in one addmm, so the backward graph has no extra node."""

    def __init__(self, width: int, scale: float) -> None:
        super().__init__(width, width)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.addmm(self.bias, x, self.weight.t(), beta=self.scale, alpha=self.scale)


class ResidualBlock(nn.Module):
    """x + scale * fc(relu(x)): branches scaled by 1/sqrt(depth) keep any depth trainable.

    Without the scale the updates of thousands of blocks add up coherently and the default
    learning rate diverges (NaN by step 3 at 2,000 blocks); with it a step moves the output
    about as much as one layer's step would, for SGD and Adam alike.
    """

    def __init__(self, width: int, scale: float = 1.0) -> None:
        super().__init__()
        self.fc = ScaledLinear(width, scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc(torch.relu(x))


class DeepMLP(nn.Module):
    """``blocks`` residual blocks between an input and an output layer."""

    def __init__(self, width: int, blocks: int) -> None:
        super().__init__()
        self.inp = nn.Linear(width, width)
        scale = 1.0 / blocks**0.5
        self.blocks = nn.Sequential(*(ResidualBlock(width, scale) for _ in range(blocks)))
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
