"""Helpers for the gradient statistics and snapshot tests: small sessions and workloads."""

from __future__ import annotations

import torch
from torch import nn

from gradexplorer.core.model.spec import ModelOptions, load_workload
from gradexplorer.core.model.workload import Workload
from gradexplorer.core.session.engine import SessionConfig, TrainingSession


def make_session(spec: str = "example:lenet", **config) -> TrainingSession:
    """A CPU session of a built-in example (SGD unless ``optimizer`` says otherwise)."""
    config.setdefault("device", "cpu")
    return TrainingSession(load_workload(spec, ModelOptions()), SessionConfig(**config))


class NanAfterSqrt(nn.Module):
    """A linear model plus ``0 * sqrt(p)`` at p = 0: p's gradient is NaN (0 × ∞) from step 1."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.p = nn.Parameter(torch.zeros(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) + (torch.sqrt(self.p) * 0).sum()


def nan_workload() -> Workload:
    """Workload whose gradients turn NaN: used as ``tests/grad_helpers.py:nan_workload``."""
    torch.manual_seed(0)
    x, y = torch.randn(8, 4), torch.randn(8, 2)
    return Workload(NanAfterSqrt(), lambda step: (x, y), nn.functional.mse_loss, "nan", "NaN grads")


class MixedModel(nn.Module):
    """A big layer (≥ 65,536 weights: kernels see it alone), small ones, and an unused one."""

    def __init__(self) -> None:
        super().__init__()
        self.big = nn.Linear(300, 300)
        self.small = nn.Linear(300, 3)
        self.unused = nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.small(torch.relu(self.big(x)))


def mixed_workload() -> Workload:
    """MixedModel on a fixed batch with an MSE loss."""
    torch.manual_seed(0)
    x, y = torch.randn(4, 300), torch.randn(4, 3)
    return Workload(MixedModel(), lambda step: (x, y), nn.functional.mse_loss, "mixed", "mixed")
