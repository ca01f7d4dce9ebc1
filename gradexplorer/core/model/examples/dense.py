"""A DenseNet-shaped CNN: inside a block every layer's output feeds every later layer.

The densest skip connections a common architecture has: in the backward graph each
concatenation sends gradient to every earlier feature map of its block, so edges span many
layers (what layouts and graph views must stay fast on). Block sizes are DenseNet-121's
(6, 12, 24, 16) or DenseNet-201's (6, 12, 48, 32); channels are small so it steps quickly.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.model.examples.options import reject_unknown, take_int
from gradexplorer.core.model.workload import Workload

BLOCKS = {121: (6, 12, 24, 16), 169: (6, 12, 32, 32), 201: (6, 12, 48, 32)}


class DenseLayer(nn.Module):
    """BN-ReLU-1×1 conv-BN-ReLU-3×3 conv on the concatenation of every earlier output."""

    def __init__(self, channels: int, growth: int) -> None:
        super().__init__()
        self.norm1 = nn.BatchNorm2d(channels)
        self.conv1 = nn.Conv2d(channels, 4 * growth, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(4 * growth)
        self.conv2 = nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False)

    def forward(self, features: list[torch.Tensor]) -> torch.Tensor:
        x = self.conv1(F.relu(self.norm1(torch.cat(features, 1))))
        return self.conv2(F.relu(self.norm2(x)))


class DenseBlock(nn.Module):
    """``layers`` dense layers; the block returns every feature map, concatenated."""

    def __init__(self, layers: int, channels: int, growth: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DenseLayer(channels + i * growth, growth) for i in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = [x]
        for layer in self.layers:
            features.append(layer(features))
        return torch.cat(features, 1)


class DenseNet(nn.Module):
    """Stem, dense blocks with halving transitions between them, pooled linear classifier."""

    def __init__(self, blocks: tuple[int, ...], growth: int, classes: int = 10) -> None:
        super().__init__()
        channels = 2 * growth
        parts: list[nn.Module] = [nn.Conv2d(3, channels, 3, padding=1, bias=False)]
        for i, layers in enumerate(blocks):
            parts.append(DenseBlock(layers, channels, growth))
            channels += layers * growth
            if i < len(blocks) - 1:
                parts += [nn.BatchNorm2d(channels), nn.ReLU(),
                          nn.Conv2d(channels, channels // 2, 1, bias=False), nn.AvgPool2d(2)]
                channels //= 2
        parts += [nn.BatchNorm2d(channels), nn.ReLU()]
        self.features = nn.Sequential(*parts)
        self.classifier = nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(F.adaptive_avg_pool2d(self.features(x), 1).flatten(1))


def build(options: dict[str, str], seed: int) -> Workload:
    """``depth=121|169|201`` picks the block sizes; ``growth``, ``size`` and ``batch`` the rest."""
    depth = take_int(options, "depth", 121, lo=121, hi=201)
    if depth not in BLOCKS:
        raise UserError(f"example option depth={depth}: choose one of {', '.join(map(str, BLOCKS))}")
    growth = take_int(options, "growth", 8, hi=64)
    size = take_int(options, "size", 16, lo=8, hi=512)
    batch = take_int(options, "batch", 4, hi=1024)
    reject_unknown(options, "dense", ("depth", "growth", "size", "batch"))
    model = DenseNet(BLOCKS[depth], growth)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, 3, size, size, generator=gen)
    target = torch.randint(0, 10, (batch,), generator=gen)
    return Workload(
        model=model,
        make_batch=lambda step: (x, target),
        loss_fn=nn.CrossEntropyLoss(),
        name="dense",
        description=f"DenseNet-{depth}-shaped CNN, growth {growth}, {size}×{size} inputs",
    )
