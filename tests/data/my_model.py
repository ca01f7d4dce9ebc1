"""A user's model file returning a gradexplorer.session.Workload."""

import torch
from torch import nn

import gradexplorer


class TwoLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(4, 16)
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        return self.head(torch.tanh(self.hidden(x)))


def build():
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(32, 4, generator=gen)
    y = x.sum(dim=1, keepdim=True)
    return gradexplorer.session.Workload(
        model=TwoLayer(),
        make_batch=lambda step: (x, y),
        loss_fn=nn.functional.mse_loss,
    )


def build_module():
    return TwoLayer()


def build_wrong():
    return {"model": TwoLayer()}


def build_failing():
    return helper_that_breaks()


def helper_that_breaks():
    raise ValueError("the dataset folder is missing")


NOT_CALLABLE = 3
