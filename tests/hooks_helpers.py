"""Shared helpers for the hook tests: seeded LeNet sessions and gradient recording."""

from __future__ import annotations

import torch
from torch import nn

from gradexplorer.core.hooks import HookRegistry
from gradexplorer.core.model.spec import ModelOptions, load_workload
from gradexplorer.core.model.workload import Workload
from gradexplorer.core.session.engine import SessionConfig, TrainingSession

Grads = dict[str, "torch.Tensor | None"]


class GradRecorder:
    """Session observer keeping a copy of every parameter's gradient after each backward."""

    def __init__(self) -> None:
        self.grads: list[Grads] = []
        self.params_after: list[dict[str, torch.Tensor]] = []

    def after_backward(self, session: TrainingSession, step: int) -> None:
        self.grads.append({
            n: None if p.grad is None else p.grad.detach().clone()
            for n, p in session.model.named_parameters()
        })

    def after_step(self, session: TrainingSession, result) -> None:
        self.params_after.append({k: v.clone() for k, v in session.model.state_dict().items()})


def lenet_session(seed: int = 0) -> TrainingSession:
    """example:lenet on the CPU with a fixed seed."""
    workload = load_workload("example:lenet", ModelOptions(seed=seed))
    return TrainingSession(workload, SessionConfig(device="cpu", seed=seed))


def run_with_hooks(
    hooks: dict[str, str], steps: int = 1, session: TrainingSession | None = None
) -> tuple[GradRecorder, HookRegistry]:
    """Run ``steps`` steps of LeNet with ``hooks`` attached; return recorded grads and registry."""
    session = session or lenet_session()
    registry = HookRegistry(session.model)
    registry.install(session)
    for module, action in hooks.items():
        registry.attach(module, action)
    recorder = GradRecorder()
    session.add_observer(recorder)
    for _ in session.run(steps):
        pass
    return recorder, registry


def inplace_workload() -> Workload:
    """Linear → Linear → ReLU(inplace=True) → Linear: a hook on '1' trips PyTorch's view check."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(4, 8), nn.Linear(8, 8), nn.ReLU(inplace=True), nn.Linear(8, 1)
    )
    gen = torch.Generator().manual_seed(0)
    x, target = torch.randn(5, 4, generator=gen), torch.randn(5, 1, generator=gen)
    return Workload(model, lambda step: (x, target), nn.MSELoss(), name="inplace")


def hook_state(model: nn.Module) -> dict[str, tuple]:
    """Every hook dictionary and the full-backward-hook flag of every module."""
    return {
        name: (
            dict(m._backward_hooks), dict(m._backward_pre_hooks), dict(m._forward_hooks),
            dict(m._forward_pre_hooks), m._is_full_backward_hook,
        )
        for name, m in model.named_modules()
    }
