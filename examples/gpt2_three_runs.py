"""Three short GPT-2 small runs at different learning rates, written by ``gx.watch`` — what the
overlay screenshots in docs/gui.md show:

    python examples/gpt2_three_runs.py runs/ 8          # or one run: ... runs/ 8 3e-4
    gradexplorer open runs/lr-1e-4 runs/lr-3e-4 runs/lr-1e-3 --select transformer.h.0.attn.c_attn.weight
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

import gradexplorer as gx

sys.path.insert(0, str(Path(__file__).parent))
from gpt2_small import gpt2_small  # noqa: E402

LEARNING_RATES = ("1e-4", "3e-4", "1e-3")


def record(folder: Path, lr: str, steps: int) -> Path:
    """``steps`` Adam steps of GPT-2 small (one batch of 32 random tokens) under watch."""
    work = gpt2_small()
    model = work.model
    opt = torch.optim.Adam(model.parameters(), lr=float(lr))
    path = folder / f"lr-{lr}"
    with gx.watch(model, opt, path, bins=64, overwrite=True) as rec:
        for step in range(steps):
            inputs, target = work.make_batch(step)
            opt.zero_grad()
            loss = work.loss_fn(model(inputs), target)
            loss.backward()
            rec.note_loss(loss)
            opt.step()
    return path


if __name__ == "__main__":
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "runs")
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    for lr in sys.argv[3:] or LEARNING_RATES:
        start = time.perf_counter()
        print(record(folder, lr, steps), f"{time.perf_counter() - start:.1f} s")
