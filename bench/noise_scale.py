"""What the noise scale (``watch(noise_scale=True)``, docs/noise.md) costs an accumulating step on
the CPU examples, against the bare accumulation step (target: ≤ 5%).

    python bench/noise_scale.py                 # digits, mlp, transformer; 4 micro-batches a step
    python bench/noise_scale.py --steps 60 --rounds 5 --micro 8

Two arms, each its own copy of the model (same weights, same batches, SGD), interleaved step by
step in one process, one torch thread:

- bare: ``k`` × (forward, ``(loss / k).backward()``), ``optimizer.step()``, ``zero_grad()``
- watch: the same loop under ``watch(model, opt, update_ratio=False)``; the noise scale's own work
  is timed where it runs (``time.thread_time``: the training thread's CPU, which other
  processes' load moves least): the parameters' gradient hooks (each keeps a reference), the
  pass over each backward's own gradients at its end (``MicroBatchNorms.backward``), the forward
  hook reading the batch size, and ``take`` at the step (the estimates, the EMAs; no run
  directory here: the rows are made on the writer's thread)

Cost: the noise scale's CPU per step over the bare step's CPU (median over rounds), printed beside
the 5% target.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch

from gradexplorer.core.model.examples import digits, mlp, transformer
from gradexplorer.core.watch import noise_watch as NW
from gradexplorer.core.watch.recorder import watch

TARGET = 0.05
WORKLOADS = {
    "digits": lambda: digits.build({"batch": "64"}, 0),
    "mlp": lambda: mlp.build({"batch": "64", "width": "256"}, 0),
    "transformer": lambda: transformer.build({}, 0),
}


class Clock:
    """Thread CPU seconds spent inside the wrapped callables."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def wrap(self, work):
        def timed(*args, **kwargs):
            start = time.thread_time()
            try:
                return work(*args, **kwargs)
            finally:
                self.seconds += time.thread_time() - start
        return timed


def micro_step(model, opt, workload, batch, k: int) -> None:
    inputs, target = batch
    size = inputs.shape[0] // k
    for i in range(k):
        part = slice(i * size, (i + 1) * size)
        (workload.loss_fn(model(inputs[part]), target[part]) / k).backward()
    opt.step()
    opt.zero_grad()


def bench(name: str, steps: int, rounds: int, k: int) -> tuple[float, float]:
    """(noise-scale CPU / bare CPU per step, median over rounds; the smoothed B_simple at the end)."""
    workload = WORKLOADS[name]()
    bare_model = workload.model
    watched = copy.deepcopy(bare_model)
    bare_opt = torch.optim.SGD(bare_model.parameters(), lr=0.01)
    opt = torch.optim.SGD(watched.parameters(), lr=0.01)
    clock = Clock()
    on_output = NW.NoiseWatch._on_output
    NW.NoiseWatch._on_output = clock.wrap(on_output)  # the forward hook, as registered
    try:
        rec = watch(watched, opt, update_ratio=False)
    finally:
        NW.NoiseWatch._on_output = on_output
    capture = rec.noise.capture
    capture.remove()  # its hooks again, timed
    capture._on_grad = clock.wrap(capture._on_grad)
    capture._hook()
    rec.noise._probe.on_backward = clock.wrap(capture.backward)
    rec.noise.take = clock.wrap(rec.noise.take)
    ratios = []
    try:
        for _ in range(2):  # warm both arms (the kernels, the probe's proof)
            batch = workload.make_batch(0)
            micro_step(bare_model, bare_opt, workload, batch, k)
            micro_step(watched, opt, workload, batch, k)
        for r in range(rounds):
            bare = 0.0
            clock.seconds = 0.0
            for s in range(steps):
                batch = workload.make_batch(r * steps + s)
                start = time.thread_time()
                micro_step(bare_model, bare_opt, workload, batch, k)
                bare += time.thread_time() - start
                micro_step(watched, opt, workload, batch, k)
            ratios.append(clock.seconds / bare)
        latest = rec.noise.latest
        return statistics.median(ratios), (latest.smoothed.b_simple if latest else float("nan"))
    finally:
        rec.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(WORKLOADS))
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--micro", type=int, default=4, help="micro-batches a step (k)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"noise scale's CPU per step / bare accumulation step's ({args.micro} micro-batches, "
          f"median of {args.rounds} rounds × {args.steps} steps; target ≤ {TARGET:.0%})")
    for name in args.models.split(","):
        ratio, b_simple = bench(name, args.steps, args.rounds, args.micro)
        verdict = "ok" if ratio <= TARGET else "OVER"
        print(f"  {name:12s} {ratio:7.2%}   target ≤ {TARGET:.0%}  {verdict}   "
              f"(smoothed B_simple at the end: {b_simple:.4g})")


if __name__ == "__main__":
    main()
