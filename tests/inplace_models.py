"""Models with a full backward hook beside an in-place op, for the redone-step tests: each
``build_*`` returns a seeded Workload (its batches from a generator of its own, so the global
random stream only feeds dropout) and the path of the module to hook. ``BUILT`` keeps every
model built, so that a test can read the one ``gradexplorer run`` trained."""

from __future__ import annotations

import torch
from torch import nn

from gradexplorer.core.model.workload import Workload

BUILT: list[nn.Module] = []


class RunningNorm(nn.Module):
    """Inputs normalised by running statistics kept the way reinforcement-learning code keeps
    them: buffers replaced (``self.mean = ...``), not updated in place."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(shape))
        self.register_buffer("count", torch.zeros((), dtype=torch.long))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.count = self.count + 1
            self.mean = self.mean + (x.detach().mean(0) - self.mean) / self.count
        return x - self.mean


class BasicBlock(nn.Module):
    """torchvision's basic block: conv-BN-ReLU(inplace)-conv-BN, ``out += identity``, ReLU(inplace)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += identity
        return self.relu(out)


def _workload(model: nn.Module, shape: tuple, classes: int | None, name: str) -> Workload:
    BUILT.append(model)
    gen = torch.Generator().manual_seed(1)

    def make_batch(step: int):
        x = torch.randn(*shape, generator=gen)
        if classes is None:
            return x, torch.randn(shape[0], 1, generator=gen)
        return x, torch.randint(0, classes, (shape[0],), generator=gen)

    loss = nn.MSELoss() if classes is None else nn.CrossEntropyLoss()
    return Workload(model, make_batch, loss, name=name)


def build_linear_relu() -> Workload:
    """Linear → Linear (hooked: '1') → ReLU(inplace=True) → Dropout → Linear."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Linear(16, 16), nn.ReLU(inplace=True),
                          nn.Dropout(0.5), nn.Linear(16, 1))
    return _workload(model, (8, 6), None, "linear-relu")


def build_residual() -> Workload:
    """Stem conv-BN-ReLU(inplace), a basic block (hooked: '3.bn2', before ``out += identity``),
    dropout, a linear head."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4),
                          nn.ReLU(inplace=True), BasicBlock(4), nn.Dropout(0.3), nn.Flatten(),
                          nn.Linear(4 * 6 * 6, 3))
    return _workload(model, (8, 3, 6, 6), 3, "residual")


def build_bn_cnn() -> Workload:
    """A running-mean input normaliser, then a BatchNorm CNN as torchvision writes them
    (hooked: '2', the first BatchNorm2d, before ReLU(inplace=True)), with dropout."""
    torch.manual_seed(0)
    model = nn.Sequential(RunningNorm((3, 8, 8)), nn.Conv2d(3, 6, 3, padding=1, bias=False),
                          nn.BatchNorm2d(6), nn.ReLU(inplace=True), nn.MaxPool2d(2),
                          nn.Conv2d(6, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8),
                          nn.ReLU(inplace=True), nn.Dropout(0.5), nn.Flatten(),
                          nn.Linear(8 * 4 * 4, 4))
    return _workload(model, (8, 3, 8, 8), 4, "bn-cnn")


HOOKED = {build_linear_relu: "1", build_residual: "3.bn2", build_bn_cnn: "2"}
