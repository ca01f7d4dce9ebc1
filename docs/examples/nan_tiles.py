"""Make the run of docs/gui.md's NaN-tiles screenshot.

    python docs/examples/nan_tiles.py runs

``runs/nan-tiles``: a four-layer MLP trained 40 SGD steps under ``gradexplorer.watch``; at the
last step the gradient of ``0.weight`` is all NaN, one element of ``0.bias``'s is +Inf and one
of ``2.weight``'s is NaN (set after backward, before the optimizer's step), so the first
Distributions tiles show a whole-NaN, an Inf and a partly-NaN gradient beside healthy ones.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn

import gradexplorer as gx

STEPS = 40


def main(out: Path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(),
                          nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(1)
    with gx.watch(model, opt, out / "nan-tiles", bins=32, overwrite=True) as rec:
        for step in range(1, STEPS + 1):
            x = torch.randn(32, 16, generator=g)
            y = torch.randint(0, 4, (32,), generator=g)
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            rec.note_loss(loss)
            loss.backward()
            if step == STEPS:
                model[0].weight.grad.fill_(float("nan"))
                model[0].bias.grad[1] = float("inf")
                model[2].weight.grad[0, 0] = float("nan")
            opt.step()
    print(f"wrote {out / 'nan-tiles'}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "runs"))
