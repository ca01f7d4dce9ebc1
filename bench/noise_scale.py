"""What the noise scale (``watch(noise_scale=True)``, docs/noise.md) costs an accumulating step on
the CPU examples, against the bare accumulation step (target: ≤ 5%).

    python bench/noise_scale.py                       # digits, mlp, lenet, transformer; k = 2, 4, 8
    python bench/noise_scale.py --models digits --micro 4 --steps 60 --rounds 7

Three arms, each its own copy of the model (same weights, same batches, SGD), interleaved step by
step in one process, one torch thread, each step timed on the training thread
(``time.thread_time``: its CPU, which other processes' load moves least):

- bare: ``k`` × (forward, ``(loss / k).backward()``), ``optimizer.step()``, ``zero_grad()``
- watch without the noise scale: the same loop under ``watch(model, opt, update_ratio=False,
  noise_scale=False)``
- watch with it (the default): ``watch(model, opt, update_ratio=False)``

Cost: (the third arm's CPU − the second's) / the bare arm's, per round, the median over rounds,
printed beside the 5% target: everything the noise scale adds to the training thread, its
gradient hooks inside the engine included. Beside it, "own code": the noise scale's Python
timed where it runs (the forward hook reading the batch size, the end-of-backward count and the
step's pass over the held gradients and its figures; not its hooks, which are C-level calls
timed only in the whole). No run directory: the rows are made on the writer's thread.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch

from gradexplorer.core.model.examples import digits, lenet, mlp, transformer
from gradexplorer.core.stats.backends import warmup
from gradexplorer.core.watch import noise_watch as NW
from gradexplorer.core.watch.recorder import watch

TARGET = 0.05
WORKLOADS = {
    "digits": lambda: digits.build({"batch": "64"}, 0),
    "mlp": lambda: mlp.build({"batch": "64", "width": "256"}, 0),
    "lenet": lambda: lenet.build({"batch": "64"}, 0),
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


def watched(model, clock: Clock | None):
    """A copy of ``model`` under watch (the noise scale timed by ``clock``; None: off)."""
    model = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    if clock is None:
        return model, opt, watch(model, opt, update_ratio=False, noise_scale=False)
    on_output = NW.NoiseWatch._on_output
    NW.NoiseWatch._on_output = clock.wrap(on_output)  # the forward hook, as registered
    try:
        rec = watch(model, opt, update_ratio=False)
    finally:
        NW.NoiseWatch._on_output = on_output
    rec.noise._probe.on_backward = clock.wrap(rec.noise.capture.backward)
    rec.noise.take = clock.wrap(rec.noise.take)  # the step's pass and figures
    return model, opt, rec


def bench(name: str, steps: int, rounds: int, k: int) -> dict:
    """The noise scale's whole cost and own code's, over the bare step (medians over rounds)."""
    workload = WORKLOADS[name]()
    bare_opt = torch.optim.SGD(workload.model.parameters(), lr=0.01)
    clock = Clock()
    off, on = watched(workload.model, None), watched(workload.model, clock)
    arms = [(workload.model, bare_opt), off[:2], on[:2]]
    whole, own, per_step = [], [], []
    try:
        for s in range(3):  # warm every arm (the probe's proof, the allocator)
            for model, opt in arms:
                micro_step(model, opt, workload, workload.make_batch(s), k)
        for r in range(rounds):
            cpu = [0.0, 0.0, 0.0]
            clock.seconds = 0.0
            for s in range(steps):
                batch = workload.make_batch(r * steps + s)
                for i, (model, opt) in enumerate(arms):
                    start = time.thread_time()
                    micro_step(model, opt, workload, batch, k)
                    cpu[i] += time.thread_time() - start
            whole.append((cpu[2] - cpu[1]) / cpu[0])
            own.append(clock.seconds / cpu[0])
            per_step.append(cpu[0] / steps)
        latest = on[2].noise.latest
        return {"whole": statistics.median(whole), "own": statistics.median(own),
                "bare_ms": statistics.median(per_step) * 1e3, "used": on[2].noise.capture.used,
                "b_simple": latest.smoothed.b_simple if latest else None,
                "spread": (min(whole), max(whole))}
    finally:
        off[2].close()
        on[2].close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(WORKLOADS))
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--micro", default="2,4,8", help="micro-batches a step (k), a list")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    warmup.ready()  # the statistics kernels compiled or loaded before any step is timed
    warmup.wait()
    print(f"the noise scale's CPU per step over the bare accumulation step's (median of "
          f"{args.rounds} rounds × {args.steps} steps, arms interleaved; target ≤ {TARGET:.0%})")
    print(f"  {'model':12s} {'k':>2s} {'bare ms':>8s} {'cost':>7s}  {'(rounds)':17s} "
          f"{'own code':>8s}")
    for name in args.models.split(","):
        for k in (int(x) for x in args.micro.split(",")):
            got = bench(name, args.steps, args.rounds, k)
            verdict = "ok" if got["whole"] <= TARGET else "OVER"
            b_simple = "none yet" if got["b_simple"] is None else f"{got['b_simple']:.4g}"
            low, high = got["spread"]
            print(f"  {name:12s} {k:2d} {got['bare_ms']:8.2f} {got['whole']:7.2%}  "
                  f"({low:6.1%}..{high:5.1%})  {got['own']:7.2%}   target ≤ {TARGET:.0%} "
                  f"{verdict}   ({got['used']}; smoothed B_simple {b_simple})",
                  flush=True)


if __name__ == "__main__":
    main()
