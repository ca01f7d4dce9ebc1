"""What the noise scale (``watch(noise_scale=True)``, docs/noise.md) costs an accumulating step on
the CPU examples, against the bare accumulation step (target: ≤ 5%).

    python bench/noise_scale.py                 # digits, mlp, lenet, transformer; k = 2, 4, 8
    python bench/noise_scale.py --steps 100 --rounds 3  # the same: 3 rounds of 100 steps each
    python bench/noise_scale.py --models mlp --micro 4 --steps 200 --rounds 5

Seven arms, each its own copy of the model (same weights, same batches, SGD), interleaved step by
step in one process in a shuffled order (seeded; no arm twice in a row: an arm that runs right
after itself finds its model in the cache, and one that runs after the noise scale's arm the
gradients it held), a fresh copy of every arm each round (where a copy lies in memory moves its
step by a few percent on the MLP, whose step is 1–2 ms: each round draws the places anew, and
"auto" starts over), one torch thread, each step timed on the training thread
(``time.thread_time``: its CPU, which other processes' load moves least):

- bare: ``k`` × (forward, ``(loss / k).backward()``), ``optimizer.step()``, ``zero_grad()``
- watch without the noise scale: the same loop under ``watch(model, opt, update_ratio=False,
  noise_scale=False, noise_every=1)``
- the same again, a second copy (row "no noise"): what the bench cannot tell from 0 (where each
  copy lies in memory, the arms' order) — its figure is the resolution of the others
- watch with it, ``noise_every`` = 1, 2, 4 and "auto" (the default; core/watch/noise_cadence.py)

Cost: (a noise arm's CPU − the second arm's) / the bare arm's over the same steps, per round,
the median over rounds and their range: on the steps the arm's capture records, on the others
(its hooks off: ~0 expected), and a step on average (what the 5% target is about) at steady
state — the steps after "auto"'s first choice, its ramp at ``START`` before it (every step where
it keeps ``START``) — and over the whole round, the ramp included: everything the noise scale
adds to the training thread, its gradient hooks inside the engine included (no timing wrapper
inside the timed arms: they would add calls to it; "auto"'s own clock of watch's hooks is its
cost). "auto" measures its own arm's CPU only (``ArmClock``: the arms share one thread). No run
directory: the per-parameter arrays (SNR and its EMA) are made when first read
(``core/watch/noise_params.py``: by a run directory's writer thread), here, unread,
``MAX_WAITING`` steps at a time at a step (counted in the cost).
"""

from __future__ import annotations

import argparse
import copy
import os
import random
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
CONTROL = "none"  # a second arm without the noise scale: what the bench cannot tell from 0
ROWS = (CONTROL, *CADENCES)


def watched(model, noise: bool, every=1):
    """A copy of ``model`` under watch, with the noise scale (on one step in ``every``) or without
    (``noise_every=1``: no clock of watch's hooks, which only "auto" keeps)."""
    model = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    return model, opt, watch(model, opt, update_ratio=False, noise_scale=noise,
                             noise_every=every if noise else 1)


def arm_orders(arms: int, steps: int, seed: int):
    """The arms' order at each step: shuffled (seeded), no arm twice in a row across a step's
    end, so that no arm finds its own model in the cache more often than another does (with
    the order in turn forwards and backwards, the first and last arms ran twice in a row every
    other step: the last, "auto", was measured on a warm cache half the time)."""
    rng, last = random.Random(seed), None
    for _ in range(steps):
        order = list(range(arms))
        rng.shuffle(order)
        while order[0] == last:
            rng.shuffle(order)
        last = order[-1]
        yield order


def one_round(workload, steps: int, k: int, seed: int) -> dict:
    """One round: a fresh copy of every arm (the same first weights; its own place in memory;
    "auto" from its start) over ``steps`` steps: each arm's CPU a step, whether each noise arm's
    capture was on, the step "auto" first chose from."""
    bare = copy.deepcopy(workload.model)
    recs = [watched(workload.model, False)] + [  # a second copy without it: the bench's resolution
        watched(workload.model, every != CONTROL, every) for every in ROWS]
    arms = [(bare, torch.optim.SGD(bare.parameters(), lr=0.01))] + [r[:2] for r in recs]
    clock = ArmClock()
    auto = recs[-1][2].noise.cadence
    auto.clock = clock  # "auto"'s arm (its hooks' clock follows: noise_cadence.py)
    warm = 3
    cpu = [[] for _ in arms]  # each arm's CPU a step
    on = [[] for _ in ROWS]  # whether the arm's capture was on for the step
    try:
        for s in range(warm):  # warm every arm (the probe's proof, the allocator)
            for model, opt in arms:
                micro_step(model, opt, workload, workload.make_batch(s), k)
        for s, order in enumerate(arm_orders(len(arms), steps, seed)):
            batch = workload.make_batch(s)
            for i in order:
                model, opt = arms[i]
                if i >= 2:
                    noise = recs[i - 1][2].noise
                    on[i - 2].append(noise is not None and (noise.cadence is None or noise.cadence.now))
                start = time.thread_time()
                if i == len(arms) - 1:
                    clock.begin()
                micro_step(model, opt, workload, batch, k)
                took = time.thread_time() - start
                if i == len(arms) - 1:
                    clock.end()
                cpu[i].append(took)
        latest = [None if r[2].noise is None else r[2].noise.latest for r in recs[1:]]
        return {"cpu": cpu, "on": on, "used": recs[2][2].noise.capture.used,
                # steady state: after "auto"'s first choice (its step numbers count the warm
                # steps); an "auto" that kept START found it within the target: every step
                "steady": auto.changes[0][0] - warm if auto.changes else 0,
                "chosen": [1 if r[2].noise is None or r[2].noise.cadence is None
                           else r[2].noise.cadence.every for r in recs[1:]],
                "b_simple": [n.smoothed.b_simple if n else None for n in latest]}
    finally:
        for rec in recs:
            rec[2].close()


def bench(name: str, steps: int, rounds: int, k: int) -> dict:
    """Per ``noise_every``: the noise scale's cost over the bare step on the steps it records,
    on the others, a step on average at steady state (the steps after "auto"'s first choice)
    and over the whole round ("auto"'s ramp at ``START`` included), per round, each round a
    fresh copy of every arm: medians over rounds and their ranges (where a copy lies in memory
    moves an arm's step by a few percent on the MLP: a round's copies are another draw)."""
    workload = WORKLOADS[name]()
    got = [one_round(workload, steps, k, seed) for seed in range(rounds)]

    def share(res, j: int, at) -> float | None:  # the arm's CPU less watch without the noise
        cpu, at = res["cpu"], list(at)  # scale's, over the bare arm's
        return None if not at else sum(cpu[j + 2][t] - cpu[1][t] for t in at) / \
            sum(cpu[0][t] for t in at)

    out = {"bare_ms": statistics.median(t for res in got for t in res["cpu"][0]) * 1e3,
           "used": got[-1]["used"], "steady_from": [res["steady"] for res in got], "rows": []}
    for j, every in enumerate(ROWS):
        figures = {"recorded": [], "other": [], "steady": [], "whole": []}
        for res in got:
            span = range(steps)
            for key, want in (("recorded", True), ("other", False)):
                figures[key].append(share(res, j, (t for t in span if res["on"][j][t] == want)))
            figures["steady"].append(share(res, j, (t for t in span if t >= res["steady"])))
            figures["whole"].append(share(res, j, span))
        out["rows"].append({"every": every, "chosen": [res["chosen"][j] for res in got],
                            "b_simple": got[-1]["b_simple"][j],
                            **{key: _spread(v) for key, v in figures.items()}})
    return out


def _spread(values) -> tuple[float, float, float] | None:
    """(median, min, max) of the rounds' figures (a round without such steps has None)."""
    values = [v for v in values if v is not None]
    return (statistics.median(values), min(values), max(values)) if values else None


def _share(figure) -> str:
    if figure is None:
        return f"{'—':>22s}"
    mid, low, high = figure
    return f"{mid:7.2%} ({low:6.1%}..{high:5.1%})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(WORKLOADS))
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--micro", default="2,4,8", help="micro-batches a step (k), a list")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    warmup.ready()  # the statistics kernels compiled or loaded before any step is timed
    warmup.wait()
    print(f"the noise scale's CPU over the bare accumulation step's ({args.rounds} rounds × "
          f"{args.steps} steps, each round a fresh copy of every arm, arms interleaved in a "
          f"shuffled order; target ≤ {TARGET:.0%} a step): on the steps it records, on the others "
          "(its hooks off), a step at steady state (after \"auto\"'s first choice) and over the "
          "whole round (\"auto\"'s ramp included): the median of the rounds and their range; "
          "the load average (1 min) at the start → end")
    print(f"  {'model':12s} {'k':>2s} {'bare ms':>8s} {'every':>12s} {'recorded step (rounds)':>23s} "
          f"{'other step (rounds)':>23s} {'steady state (rounds)':>23s} {'whole round (rounds)':>23s}")
    for name in args.models.split(","):
        for k in (int(x) for x in args.micro.split(",")):
            load = os.getloadavg()[0]
            got = bench(name, args.steps, args.rounds, k)
            load = f"load {load:.2f} → {os.getloadavg()[0]:.2f}"
            steady = "/".join(str(s + 1) for s in got["steady_from"])
            for row in got["rows"]:
                every = f"{row['every']}" if row["every"] != "auto" else \
                    "auto→" + "/".join(map(str, row["chosen"]))
                every = "no noise" if row["every"] == CONTROL else every
                verdict = "ok" if row["steady"] and row["steady"][0] <= TARGET else "OVER"
                verdict = "(the resolution)" if row["every"] == CONTROL else \
                    f"steady ≤ {TARGET:.0%} {verdict}" + (" (watch's default)" if row["every"] == "auto"
                                                         else " (on request, not the default)")
                b_simple = "none yet" if row["b_simple"] is None else f"{row['b_simple']:.4g}"
                print(f"  {name:12s} {k:2d} {got['bare_ms']:8.2f} {every:>12s} "
                      f"{_share(row['recorded'])} {_share(row['other'])} {_share(row['steady'])} "
                      f"{_share(row['whole'])}   {verdict}   ({got['used']}; steady from step "
                      f"{steady}; smoothed B_simple {b_simple}; {load})", flush=True)


if __name__ == "__main__":
    main()
