"""A small model whose gradient turns NaN at a square root of 0 (for the NaN-origin tests).

A mask zeroes the negative features, ``sqrt`` of 0 has an infinite derivative, and the mask's
multiplication then turns that infinity into 0 · ∞ = NaN, which reaches every parameter. The
gradient is born non-finite in ``SqrtBackward0`` (its input gradient is finite, its output not).
``build_forward_nan`` makes the loss itself NaN: a log of a negative number in module ``head``.
"""

import torch
from torch import nn

from gradexplorer.session import Workload


class RootAct(nn.Module):
    def forward(self, x):
        return torch.sqrt(x * (x > 0))


class Log(nn.Module):
    def forward(self, x):
        return torch.log(x)


class SqrtNet(nn.Module):
    def __init__(self, head: nn.Module | None = None):
        super().__init__()
        self.fc = nn.Linear(8, 16)
        self.act = RootAct()
        self.out = nn.Linear(16, 4)
        self.head = head or nn.Identity()

    def forward(self, x):
        return self.head(self.out(self.act(self.fc(x))))


def _workload(model: nn.Module, name: str, description: str) -> Workload:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(32, 8, generator=gen)
    target = torch.randn(32, 4, generator=gen)
    return Workload(model=model, make_batch=lambda step: (x, target), loss_fn=nn.MSELoss(), name=name,
                    description=description)


def build():
    torch.manual_seed(0)
    return _workload(SqrtNet(), "sqrt-nan", "fc → sqrt of masked features → out")


def build_forward_nan():
    torch.manual_seed(0)
    return _workload(SqrtNet(Log()), "log-nan", "fc → sqrt → out → log (NaN loss)")
