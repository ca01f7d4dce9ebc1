"""A residual CNN with BatchNorm; ``resnet18`` is ResNet-18 sized (about 11.7M parameters)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from gradexplorer.core.model.examples.options import reject_unknown, take_int
from gradexplorer.core.model.workload import Workload


class BasicBlock(nn.Module):
    """Two 3×3 conv-BN pairs with an identity (or 1×1 projection) shortcut."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    """Stem, four stages of basic blocks (widths w, 2w, 4w, 8w), global pooling, classifier."""

    def __init__(self, width: int = 16, blocks: int = 1, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU()
        )
        stages, cin = [], width
        for i in range(4):
            cout = width * 2**i
            layers = [BasicBlock(cin, cout, 1 if i == 0 else 2)]
            layers += [BasicBlock(cout, cout, 1) for _ in range(blocks - 1)]
            stages.append(nn.Sequential(*layers))
            cin = cout
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def _build(name: str, options: dict[str, str], seed: int, defaults: dict[str, int]) -> Workload:
    width = take_int(options, "width", defaults["width"], hi=1024)
    blocks = take_int(options, "blocks", defaults["blocks"], hi=1000)
    batch = take_int(options, "batch", defaults["batch"], hi=4096)
    size = take_int(options, "size", defaults["size"], lo=8, hi=1024)
    classes = take_int(options, "classes", defaults["classes"], hi=100_000)
    reject_unknown(options, name, ("width", "blocks", "batch", "size", "classes"))
    model = ResNet(width, blocks, classes)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, 3, size, size, generator=gen)
    target = torch.randint(0, classes, (batch,), generator=gen)
    n = sum(p.numel() for p in model.parameters())
    return Workload(
        model=model,
        make_batch=lambda step: (x, target),
        loss_fn=nn.CrossEntropyLoss(),
        name=name,
        description=f"residual CNN with BatchNorm ({n:,} parameters), batch {batch}×3×{size}×{size}",
    )


def build(options: dict[str, str], seed: int) -> Workload:
    """A small residual CNN (width 16, one block per stage) on 8×3×32×32 inputs."""
    return _build("resnet", options, seed, {"width": 16, "blocks": 1, "batch": 8, "size": 32, "classes": 10})


def build_resnet18(options: dict[str, str], seed: int) -> Workload:
    """ResNet-18 sized (width 64, two blocks per stage, 1000 classes: 11.7M parameters) on 8×3×64×64."""
    defaults = {"width": 64, "blocks": 2, "batch": 8, "size": 64, "classes": 1000}
    return _build("resnet18", options, seed, defaults)
