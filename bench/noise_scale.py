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
gradient hooks inside the engine included (no timing wrapper inside the timed arms: they would
add calls to it). No run directory: the per-parameter arrays (SNR and its EMA) are made when
first read (``core/watch/noise_params.py``: by a run directory's writer thread), here, unread,
``MAX_WAITING`` steps at a time at a step (counted in the cost).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch

from gradexplorer.core.model.examples import digits, lenet, mlp, transformer
from gradexplorer.core.stats.backends import warmup
from gradexplorer.core.watch.recorder import watch

TARGET = 0.05
WORKLOADS = {
    "digits": lambda: digits.build({"batch": "64"}, 0),
    "mlp": lambda: mlp.build({"batch": "64", "width": "256"}, 0),
    "lenet": lambda: lenet.build({"batch": "64"}, 0),
    "transformer": lambda: transformer.build({}, 0),
}


def micro_step(model, opt, workload, batch, k: int) -> None:
    inputs, target = batch
    size = inputs.shape[0] // k
    for i in range(k):
        part = slice(i * size, (i + 1) * size)
        (workload.loss_fn(model(inputs[part]), target[part]) / k).backward()
    opt.step()
    opt.zero_grad()


def watched(model, noise: bool):
    """A copy of ``model`` under watch, with the noise scale or without."""
    model = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    return model, opt, watch(model, opt, update_ratio=False, noise_scale=noise)


def bench(name: str, steps: int, rounds: int, k: int) -> dict:
    """The noise scale's cost over the bare step (the median over rounds, and their range)."""
    workload = WORKLOADS[name]()
    bare_opt = torch.optim.SGD(workload.model.parameters(), lr=0.01)
    off, on = watched(workload.model, False), watched(workload.model, True)
    arms = [(workload.model, bare_opt), off[:2], on[:2]]
    whole, per_step = [], []
    try:
        for s in range(3):  # warm every arm (the probe's proof, the allocator)
            for model, opt in arms:
                micro_step(model, opt, workload, workload.make_batch(s), k)
        for r in range(rounds):
            cpu = [0.0, 0.0, 0.0]
            for s in range(steps):
                batch = workload.make_batch(r * steps + s)
                for i, (model, opt) in enumerate(arms):
                    start = time.thread_time()
                    micro_step(model, opt, workload, batch, k)
                    cpu[i] += time.thread_time() - start
            whole.append((cpu[2] - cpu[1]) / cpu[0])
            per_step.append(cpu[0] / steps)
        latest = on[2].noise.latest
        return {"whole": statistics.median(whole),
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
    print(f"  {'model':12s} {'k':>2s} {'bare ms':>8s} {'cost':>7s}  (rounds)")
    for name in args.models.split(","):
        for k in (int(x) for x in args.micro.split(",")):
            got = bench(name, args.steps, args.rounds, k)
            verdict = "ok" if got["whole"] <= TARGET else "OVER"
            b_simple = "none yet" if got["b_simple"] is None else f"{got['b_simple']:.4g}"
            low, high = got["spread"]
            print(f"  {name:12s} {k:2d} {got['bare_ms']:8.2f} {got['whole']:7.2%}  "
                  f"({low:6.1%}..{high:5.1%})   target ≤ {TARGET:.0%} {verdict}   "
                  f"({got['used']}; smoothed B_simple {b_simple})", flush=True)


if __name__ == "__main__":
    main()
