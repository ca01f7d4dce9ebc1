"""A small classifier whose ``side`` layer alone sees the last four input features, trained by a
plain loop under gradexplorer.watch; ``inject`` multiplies those features of one batch."""

import torch
from torch import nn

import gradexplorer as gx

BATCH = 32


class SideNet(nn.Module):
    """logits = head(relu(body(x[:, :8]))) + side(x[:, 8:])."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(8, 16)
        self.head = nn.Linear(16, 4)
        self.side = nn.Linear(4, 4)

    def forward(self, x):
        return self.head(torch.relu(self.body(x[:, :8]))) + self.side(x[:, 8:])


def sample_ids(step: int) -> list[int]:
    """The dataset indices of step ``step``'s batch (what a DataLoader's sampler would give)."""
    return list(range(step * BATCH, (step + 1) * BATCH))


def train(run_dir, steps: int, inject: int | None = None, factor: float = 100.0, **watch):
    """Train ``steps`` steps, noting batch ids and per-sample losses; returns the Recorder."""
    torch.manual_seed(0)
    model = SideNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    with gx.watch(model, opt, run_dir, bins=8, **watch) as rec:
        for step in range(1, steps + 1):
            x = torch.randn(BATCH, 12, generator=g)
            y = torch.randint(0, 4, (BATCH,), generator=g)
            if step == inject:
                x[:, 8:] *= factor
            opt.zero_grad()
            per_sample = nn.functional.cross_entropy(model(x), y, reduction="none")
            loss = per_sample.mean()
            rec.note_batch(sample_ids(step))
            rec.note_loss(loss, per_sample=per_sample)
            loss.backward()
            opt.step()
    return rec
