"""The worked examples of docs/noise.md: the gradient noise scale of the digits CNN and of the
token-reversing transformer.

    python docs/examples/noise_digits.py runs                # the digits CNN
    python docs/examples/noise_digits.py runs transformer    # the transformer example

``runs/noise`` (``runs/noise-transformer``): the example trained under ``gradexplorer.watch``,
each optimizer step a batch of 64 as 4 micro-batches of 16 (gradient accumulation, each
micro-batch's loss divided by 4) — the digits CNN 150 steps of SGD with momentum 0.9 at lr 0.1,
the transformer 300 steps of Adam at lr 1e-3; every 25 steps a line with the step's B_simple,
the smoothed one and its ±1 standard-error band.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

import gradexplorer as gx

MICRO, BATCH = 4, 64
SETUPS = {  # example -> (steps, optimizer, run folder)
    "digits": (150, lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), "noise"),
    "transformer": (300, lambda p: torch.optim.Adam(p, lr=1e-3), "noise-transformer"),
}


def main(out: Path, example: str = "digits") -> None:
    steps, make_optimizer, folder = SETUPS[example]
    torch.manual_seed(0)
    work = gx.load_workload(f"example:{example}:batch={BATCH}")
    model, loss_fn = work.model, work.loss_fn
    opt = make_optimizer(model.parameters())
    size = BATCH // MICRO
    # every step (a short run; the default "auto" takes one step in N where it costs more than 5%)
    with gx.watch(model, opt, out / folder, overwrite=True, noise_every=1) as rec:
        for step in range(steps):
            x, y = work.make_batch(step)
            for i in range(MICRO):
                part = slice(i * size, (i + 1) * size)
                loss = loss_fn(model(x[part]), y[part])
                rec.note_loss(loss)
                (loss / MICRO).backward()
            opt.step()
            opt.zero_grad()
            noise = rec.noise.latest
            if (step + 1) % 25 == 0:
                s = noise.smoothed
                print(f"step {step + 1:3d}  loss {rec.ledger.loss:.3f}  "
                      f"B_simple this step {noise.whole.b_simple:8.1f}  smoothed {s.b_simple:7.1f}"
                      f"  (±1 s.e. {s.low:6.1f}..{s.high:6.1f})")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "runs"), *sys.argv[2:3])
