"""A small CNN learning the 8×8 handwritten digits that ship inside gradexplorer."""

from __future__ import annotations

from importlib import resources

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from gradexplorer.core.model.examples.options import reject_unknown, take_int
from gradexplorer.core.model.workload import Workload


def load_digits() -> tuple[torch.Tensor, torch.Tensor]:
    """The 1,797 UCI digits: standardised N×1×8×8 float images, int64 labels."""
    with resources.files("gradexplorer.core.model.examples.data").joinpath("digits.npz").open("rb") as fh:
        data = np.load(fh)
        images, labels = data["images"], data["labels"]
    x = torch.from_numpy(images.astype(np.float32) / 16.0).unsqueeze(1)
    x = (x - x.mean()) / x.std()
    return x, torch.from_numpy(labels.astype(np.int64))


class DigitsNet(nn.Module):
    """conv1 1→16 3×3, conv2 16→32 3×3, 2×2 pool, fc1 512→64, fc2 64→10."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 4 * 4, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(x)


def build(options: dict[str, str], seed: int) -> Workload:
    """Mini-batches drawn from the first 1,500 digits (the rest held out), cross-entropy."""
    batch = take_int(options, "batch", 64, hi=1500)
    reject_unknown(options, "digits", ("batch",))
    x, y = load_digits()
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(1234))
    x, y = x[order], y[order]
    train_x, train_y, test_x, test_y = x[:1500], y[:1500], x[1500:], y[1500:]
    per_epoch = len(train_x) // batch
    base = torch.Generator().manual_seed(seed)
    epoch_seed = int(torch.randint(0, 2**31 - 1, (1,), generator=base))

    def make_batch(step: int):
        epoch, i = divmod(step, per_epoch)
        perm = torch.randperm(len(train_x), generator=torch.Generator().manual_seed(epoch_seed + epoch))
        idx = perm[i * batch : (i + 1) * batch]
        return train_x[idx], train_y[idx]

    return Workload(
        model=DigitsNet(),
        make_batch=make_batch,
        loss_fn=nn.CrossEntropyLoss(),
        name="digits",
        description=f"CNN on the 8×8 handwritten digits (1,500 train / 297 held out), batch {batch}",
        extra={
            "test_set": (test_x, test_y),
            "optimizer_defaults": {"sgd": {"lr": 0.1, "momentum": 0.9}, "adam": {"lr": 3e-3}},
        },
    )
