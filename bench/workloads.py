"""The standard workloads the per-step benchmarks train (``watch_floor.py``, ``recorder.py``).

Each builder returns ``(model, batch, loss_fn)``: ``batch(step)`` gives ``(inputs, target)``
(inputs a tensor, a tuple, or a dict of keyword arguments), ``loss_fn(output, target)`` the
loss (None: the model returns it, as transformers' models do given ``labels=``). Built from
code, no download, seeded:

- ``mlp256``: 4×(Linear 256→256, ReLU) + Linear(256, 1), batch 64, MSE (10 parameters)
- ``resnet18``: torchvision's ``resnet18()`` (7×7 stride-2 stem, max-pool, BasicBlocks
  [2, 2, 2, 2], BatchNorm, 1000 classes: 11,689,512 numbers), written out here because
  torchvision need not be installed; batch 8×3×64×64 (``resnet18-224``: 32×3×224×224)
- ``gpt2-tiny``: transformers' GPT2LMHeadModel, 2 layers × 128, 1000 tokens, batch 8×32
- ``gpt2-small``: GPT2LMHeadModel of GPT-2 small's config (124M numbers), batch 8×128

``quick=True`` shrinks the slow ones on a CPU (``resnet18-224`` to batch 2, ``gpt2-small``
to 2×64 tokens).
"""

from __future__ import annotations

import torch
from torch import nn

STANDARD = ("resnet18", "resnet18-224", "gpt2-tiny", "gpt2-small", "mlp256")


class BasicBlock(nn.Module):
    """torchvision's BasicBlock: 3×3 conv-BN-ReLU, 3×3 conv-BN, the shortcut added, ReLU."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet18(nn.Module):
    """torchvision.models.resnet18(): the same modules, names, shapes and initialisation."""

    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin = 64
        for i, cout in enumerate((64, 128, 256, 512)):
            stride = 1 if i == 0 else 2
            setattr(self, f"layer{i + 1}", nn.Sequential(BasicBlock(cin, cout, stride),
                                                        BasicBlock(cout, cout, 1)))
            cin = cout
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet18(batch: int, size: int):
    torch.manual_seed(0)
    model = ResNet18()

    def make(step):
        g = torch.Generator().manual_seed(step)
        return torch.randn(batch, 3, size, size, generator=g), torch.randint(0, 1000, (batch,), generator=g)
    return model, make, nn.functional.cross_entropy


def mlp256():
    """The issue's MLP: 4x(Linear 256->256, ReLU) + Linear(256, 1), batch 64, MSE."""
    torch.manual_seed(0)
    layers = []
    for _ in range(4):
        layers += [nn.Linear(256, 256), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(256, 1))

    def batch(step):
        g = torch.Generator().manual_seed(step)
        return torch.randn(64, 256, generator=g), torch.randn(64, 1, generator=g)
    return model, batch, nn.functional.mse_loss


def gpt2(batch: int, tokens: int, **config):
    """GPT2LMHeadModel from a GPT2Config (``config``: its overrides), called with
    ``input_ids=`` and ``labels=`` (the loss is the model's own)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    settings = GPT2Config(**config)
    model = GPT2LMHeadModel(settings)

    def make(step):
        g = torch.Generator().manual_seed(step)
        ids = torch.randint(0, settings.vocab_size, (batch, tokens), generator=g)
        return {"input_ids": ids, "labels": ids}, None
    return model, make, None


def gpt2_tiny():
    """GPT-2 from a small config (2 layers, 128 wide, 1000 tokens), batch 8x32 tokens."""
    return gpt2(8, 32, n_layer=2, n_head=2, n_embd=128, vocab_size=1000, n_positions=64,
                bos_token_id=0, eos_token_id=0)


def build(name: str, quick: bool = False):
    """``(model, batch, loss_fn)`` of the standard workload ``name``."""
    if name == "mlp256":
        return mlp256()
    if name == "resnet18":
        return resnet18(8, 64)
    if name == "resnet18-224":
        return resnet18(2 if quick else 32, 224)
    if name in ("gpt2", "gpt2-tiny"):
        return gpt2_tiny()
    if name == "gpt2-small":
        return gpt2(*((2, 64) if quick else (8, 128)))
    raise ValueError(f"unknown workload {name!r}; choose one of {', '.join(STANDARD)}")


def loss_of(model, inputs, target, loss_fn):
    """The loss of one batch: keyword inputs (a dict) to a model returning its own loss, or
    ``loss_fn(model(inputs), target)``."""
    if isinstance(inputs, dict):
        out = model(**inputs)
        return out.loss if loss_fn is None else loss_fn(out, target)
    return loss_fn(model(*inputs) if isinstance(inputs, tuple) else model(inputs), target)


def to(value, device):
    if isinstance(value, dict):
        return {k: to(v, device) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(to(v, device) for v in value)
    return value.to(device) if isinstance(value, torch.Tensor) else value
