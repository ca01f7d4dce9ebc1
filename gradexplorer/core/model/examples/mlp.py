"""The hooks tutorial's two-layer MLP, with the forward pass that actually runs."""

from __future__ import annotations

import torch
from torch import nn

from gradexplorer.core.model.examples.options import reject_unknown, take_int
from gradexplorer.core.model.workload import Workload


class MLP(nn.Module):
    """fc1 Linear(10, 10) → ReLU → fc2 Linear(10, 10), batched (no ``view(-1)``)."""

    def __init__(self, width: int = 10) -> None:
        super().__init__()
        self.fc1 = nn.Linear(width, width)
        self.fc2 = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


def build(options: dict[str, str], seed: int) -> Workload:
    """The MLP on a fixed 10×10 batch regressed onto a fixed random target with MSE."""
    batch = take_int(options, "batch", 10, hi=100_000)
    width = take_int(options, "width", 10, hi=100_000)
    reject_unknown(options, "mlp", ("batch", "width"))
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, width, generator=gen)
    target = torch.randn(batch, width, generator=gen)
    return Workload(
        model=MLP(width),
        make_batch=lambda step: (x, target),
        loss_fn=nn.MSELoss(),
        name="mlp",
        description=f"two-layer MLP ({width}→{width}→{width}) on a {batch}×{width} batch, MSE",
    )
