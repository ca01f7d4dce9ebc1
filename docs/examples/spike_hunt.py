"""Make the runs of docs/diagnose.md's worked spike and divergence hunts.

    python docs/examples/spike_hunt.py runs

- ``runs/spiky``: a small classifier trained 400 steps under ``gradexplorer.watch``; at step 300
  one batch arrives with its last four features 100× too large (a unit mix-up in the data). Only
  the ``side`` layer reads those features. Each step notes its sample ids and per-sample losses.
- ``runs/lenet`` and ``runs/lenet-hooked``: LeNet trained 8 steps twice from the same seed;
  the second run halves the gradient flowing out of ``fc1`` (``scale:0.5``) from step 5.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn

import gradexplorer as gx

BATCH = 32


class SideNet(nn.Module):
    """logits = head(relu(body(x[:, :8]))) + side(x[:, 8:])."""

    def __init__(self) -> None:
        super().__init__()
        self.body, self.head, self.side = nn.Linear(8, 16), nn.Linear(16, 4), nn.Linear(4, 4)

    def forward(self, x):
        return self.head(torch.relu(self.body(x[:, :8]))) + self.side(x[:, 8:])


def spiky(run_dir: Path, steps: int = 400, bad_step: int = 300) -> None:
    torch.manual_seed(0)
    model = SideNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    data = torch.Generator().manual_seed(1)
    with gx.watch(model, opt, run_dir, bins=16) as rec:
        for step in range(1, steps + 1):
            x, y = torch.randn(BATCH, 12, generator=data), torch.randint(0, 4, (BATCH,), generator=data)
            if step == bad_step:
                x[:, 8:] *= 100
            opt.zero_grad()
            per_sample = nn.functional.cross_entropy(model(x), y, reduction="none")
            rec.note_batch([f"sample-{i}" for i in range(step * BATCH, (step + 1) * BATCH)])
            rec.note_loss(per_sample.mean(), per_sample=per_sample)
            per_sample.mean().backward()
            opt.step()


def lenet(run_dir: Path, hook_from: int | None = None, steps: int = 8, every: int = 1) -> Path:
    """LeNet from seed 0 under ``watch`` (``scale:0.5`` on fc1 from step ``hook_from``);
    tests/test_diverge.py records its runs with this same loop."""
    torch.manual_seed(0)
    model = gx.load_workload("example:lenet").model  # the same weights as LeNet() from seed 0
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.Generator().manual_seed(3)
    with gx.watch(model, opt, run_dir, bins=16, stats_every=every) as rec:
        for step in range(1, steps + 1):
            if step == hook_from:
                gx.hooks.HookRegistry(model).attach("fc1", "scale:0.5")
            x, y = torch.randn(4, 1, 32, 32, generator=data), torch.randn(4, 10, generator=data)
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            rec.note_loss(loss)
            loss.backward()
            opt.step()
    return run_dir


def main(root: str) -> None:
    out = Path(root)
    if any((out / name).exists() for name in ("spiky", "lenet", "lenet-hooked")):
        sys.exit(f"{out}: holds runs already; give an empty folder")
    spiky(out / "spiky")
    lenet(out / "lenet")
    lenet(out / "lenet-hooked", hook_from=5)
    print(f"wrote {out / 'spiky'}, {out / 'lenet'}, {out / 'lenet-hooked'}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs")
