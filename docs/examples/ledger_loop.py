"""Make the run of docs/gui.md's step-ledger screenshot.

    python docs/examples/ledger_loop.py runs

``runs/ledger``: a small MLP trained 80 optimizer steps under ``gradexplorer.watch`` with two
micro-batches per step, a GradScaler (CPU) and ``clip_grad_norm_(…, 0.45)``; at steps 25 and 60
one micro-batch holds an Inf, so the GradScaler skips those steps (recorded as skipped).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn

import gradexplorer as gx

STEPS, MICRO, SKIP_AT = 80, 2, (25, 60)


def main(out: Path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, 4))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    g = torch.Generator().manual_seed(1)
    with gx.watch(model, opt, out / "ledger", bins=32, overwrite=True, scaler=scaler) as rec:
        for step in range(1, STEPS + 1):
            for micro in range(MICRO):
                x = torch.randn(32, 16, generator=g) * 3
                y = torch.randint(0, 4, (32,), generator=g)
                if step in SKIP_AT and micro == 1:
                    x[0, 0] = float("inf")
                loss = nn.functional.cross_entropy(model(x), y)
                rec.note_loss(loss)
                scaler.scale(loss / MICRO).backward()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.45)
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
    print(f"wrote {out / 'ledger'}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "runs"))
