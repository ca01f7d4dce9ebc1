"""What the noise scale (``watch(noise_scale=True)``, docs/noise.md) costs an accumulating step on
the CPU examples, against the bare accumulation step (target: ≤ 5%).

    python bench/noise_scale.py                       # digits, mlp, lenet, transformer; k = 2, 4, 8
    python bench/noise_scale.py --models digits --micro 4 --steps 60 --rounds 7

Six arms, each its own copy of the model (same weights, same batches, SGD), interleaved step by
step in one process (in turn forwards and backwards: the order moves what a step finds in the
cache), one torch thread, each step timed on the training thread
(``time.thread_time``: its CPU, which other processes' load moves least):

- bare: ``k`` × (forward, ``(loss / k).backward()``), ``optimizer.step()``, ``zero_grad()``
- watch without the noise scale: the same loop under ``watch(model, opt, update_ratio=False,
  noise_scale=False)``
- watch with it, ``noise_every`` = 1 (the default), 2, 4 and "auto" (core/watch/noise_cadence.py)

Cost: (a noise arm's CPU − the second arm's) / the bare arm's over the same steps, per round,
the median over rounds: on the steps the arm's capture records, on the others (its hooks off:
~0 expected), and over every step (what the 5% target is about): everything the noise scale adds
to the training thread, its gradient hooks inside the engine included (no timing wrapper inside
the timed arms: they would add calls to it). "auto" measures its own arm's CPU only (``ArmClock``:
the arms share one thread). No run directory: the per-parameter arrays (SNR and its EMA) are made when
first read (``core/watch/noise_params.py``: by a run directory's writer thread), here, unread,
``MAX_WAITING`` steps at a time at a step (counted in the cost).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from arm_clock import ArmClock  # noqa: E402 - bench/arm_clock.py: one arm's CPU

from gradexplorer.core.model.examples import digits, lenet, mlp, transformer  # noqa: E402
from gradexplorer.core.stats.backends import warmup  # noqa: E402
from gradexplorer.core.watch.recorder import watch  # noqa: E402

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


CADENCES = (1, 2, 4, "auto")  # noise_every: one arm each


def watched(model, noise: bool, every=1):
    """A copy of ``model`` under watch, with the noise scale (on one step in ``every``) or without."""
    model = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    return model, opt, watch(model, opt, update_ratio=False, noise_scale=noise, noise_every=every)


def bench(name: str, steps: int, rounds: int, k: int) -> dict:
    """Per ``noise_every``: the noise scale's cost over the bare step on the steps it records,
    on the others, and on average a step (the medians over rounds, and their ranges)."""
    workload = WORKLOADS[name]()
    bare_opt = torch.optim.SGD(workload.model.parameters(), lr=0.01)
    recs = [watched(workload.model, False)] + [watched(workload.model, True, e) for e in CADENCES]
    arms = [(workload.model, bare_opt)] + [r[:2] for r in recs]
    clock = ArmClock()
    recs[-1][2].noise.cadence.clock = clock  # "auto"'s arm
    n = len(CADENCES)
    figures = [{"recorded": [], "other": [], "whole": []} for _ in CADENCES]
    per_step = []
    try:
        for s in range(3):  # warm every arm (the probe's proof, the allocator)
            for model, opt in arms:
                micro_step(model, opt, workload, workload.make_batch(s), k)
        for r in range(rounds):
            bare, off = [], []
            cpu = [[] for _ in CADENCES]
            on = [[] for _ in CADENCES]  # whether the arm's capture was on for the step
            for s in range(steps):
                batch = workload.make_batch(r * steps + s)
                order = range(len(arms)) if s % 2 == 0 else reversed(range(len(arms)))
                for i in order:  # each arm after the others in turn (the cache each leaves)
                    model, opt = arms[i]
                    if i >= 2:
                        on[i - 2].append(recs[i - 1][2].noise.cadence is None or
                                         recs[i - 1][2].noise.cadence.now)
                    start = time.thread_time()
                    if i == len(arms) - 1:
                        clock.begin()
                    micro_step(model, opt, workload, batch, k)
                    took = time.thread_time() - start
                    if i == len(arms) - 1:
                        clock.end()
                    (bare if i == 0 else off if i == 1 else cpu[i - 2]).append(took)
            per_step.append(sum(bare) / steps)
            for j in range(n):  # the arm's CPU less watch without the noise scale's, same steps
                for key, want in (("recorded", True), ("other", False)):
                    at = [t for t, o in enumerate(on[j]) if o == want]
                    if at:
                        figures[j][key].append(sum(cpu[j][t] - off[t] for t in at) /
                                               sum(bare[t] for t in at))
                figures[j]["whole"].append((sum(cpu[j]) - sum(off)) / sum(bare))
        out = {"bare_ms": statistics.median(per_step) * 1e3, "used": recs[1][2].noise.capture.used,
               "rows": []}
        for j, every in enumerate(CADENCES):
            noise = recs[j + 1][2].noise
            latest = noise.latest
            out["rows"].append({"every": every, "chosen": noise.cadence.every if noise.cadence else 1,
                                "b_simple": latest.smoothed.b_simple if latest else None,
                                **{key: (statistics.median(v), min(v), max(v)) if v else None
                                   for key, v in figures[j].items()}})
        return out
    finally:
        for rec in recs:
            rec[2].close()


def _share(figure) -> str:
    if figure is None:
        return f"{'—':>22s}"
    mid, low, high = figure
    return f"{mid:7.2%} ({low:6.1%}..{high:5.1%})"


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
    print(f"the noise scale's CPU over the bare accumulation step's (median of {args.rounds} "
          f"rounds × {args.steps} steps, arms interleaved; target ≤ {TARGET:.0%} a step): on the "
          "steps it records, on the others (its hooks off), and on average a step")
    print(f"  {'model':12s} {'k':>2s} {'bare ms':>8s} {'every':>10s} {'recorded step (rounds)':>23s} "
          f"{'other step (rounds)':>23s} {'a step (rounds)':>23s}")
    for name in args.models.split(","):
        for k in (int(x) for x in args.micro.split(",")):
            got = bench(name, args.steps, args.rounds, k)
            for row in got["rows"]:
                every = f"{row['every']}" if row["every"] != "auto" else f"auto→{row['chosen']}"
                verdict = "ok" if row["whole"][0] <= TARGET else "OVER"
                b_simple = "none yet" if row["b_simple"] is None else f"{row['b_simple']:.4g}"
                print(f"  {name:12s} {k:2d} {got['bare_ms']:8.2f} {every:>10s} "
                      f"{_share(row['recorded'])} {_share(row['other'])} {_share(row['whole'])}   "
                      f"target ≤ {TARGET:.0%} a step {verdict}   ({got['used']}; smoothed "
                      f"B_simple {b_simple})", flush=True)


if __name__ == "__main__":
    main()
