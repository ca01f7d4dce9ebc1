"""The LeNet of PyTorch's 60-minute tutorial, as the gradient-vector tutorial uses it."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from gradexplorer.core.model.examples.options import reject_unknown, take_int
from gradexplorer.core.model.workload import Workload


class LeNet(nn.Module):
    """conv1 1→6 5×5, conv2 6→16 5×5, fc1 400→120, fc2 120→84, fc3 84→10: 61,706 parameters."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), (2, 2))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def build(options: dict[str, str], seed: int) -> Workload:
    """LeNet on one fixed 1×1×32×32 input, MSE against a fixed random 1×10 target."""
    batch = take_int(options, "batch", 1, hi=4096)
    reject_unknown(options, "lenet", ("batch",))
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, 1, 32, 32, generator=gen)
    target = torch.randn(batch, 10, generator=gen)
    return Workload(
        model=LeNet(),
        make_batch=lambda step: (x, target),
        loss_fn=nn.MSELoss(),
        name="lenet",
        description="LeNet (61,706 parameters), one 1×1×32×32 input, MSE to a random target",
    )
