"""A model whose middle block runs under reentrant activation checkpointing
(``torch.utils.checkpoint.checkpoint(..., use_reentrant=True)``), for the NaN-origin tests.

``build``: the block's activation is a log of negative numbers (a NaN loss, born in module
``block.act``). ``build_backward``: it is ``sqrt`` of masked features, whose derivative at 0 is
infinite (a finite loss, NaN gradients born in ``SqrtBackward0`` of ``block.act``).
"""

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from gradexplorer.session import Workload


class Log(nn.Module):
    def forward(self, x):
        return torch.log(x)


class RootAct(nn.Module):
    def forward(self, x):
        return torch.sqrt(x * (x > 0))


class Block(nn.Module):
    def __init__(self, act: nn.Module) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.act = act

    def forward(self, x):
        return self.act(self.fc(x))


class CheckpointedNet(nn.Module):
    def __init__(self, act: nn.Module, reentrant: bool = True) -> None:
        super().__init__()
        self.inp = nn.Linear(4, 8)
        self.block = Block(act)
        self.out = nn.Linear(8, 2)
        self.reentrant = reentrant

    def forward(self, x):
        return self.out(checkpoint(self.block, self.inp(x), use_reentrant=self.reentrant))


def _workload(act: nn.Module, name: str, reentrant: bool = True) -> Workload:
    torch.manual_seed(0)
    model = CheckpointedNet(act, reentrant)
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(16, 4, generator=gen), torch.randn(16, 2, generator=gen)
    return Workload(model, lambda step: (x, y), nn.MSELoss(), name=name)


def build(reentrant: bool = True) -> Workload:
    return _workload(Log(), "checkpoint-log", reentrant)


def build_backward(reentrant: bool = True) -> Workload:
    return _workload(RootAct(), "checkpoint-sqrt", reentrant)
