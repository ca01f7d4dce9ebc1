"""What the noise scale across DDP ranks (``core/watch/noise_ranks.py``, docs/noise.md) costs a DDP
step on the CPU examples, 2 gloo ranks on 127.0.0.1, against the bare DDP step.

    python bench/noise_ranks.py                        # digits, transformer; one backward a rank
    python bench/noise_ranks.py --micro 2 --steps 40   # 2 micro-batches a rank (no_sync)
    python bench/noise_ranks.py --noise-every 4        # watch(noise_every=4) (or "auto")

Two arms on each rank, each its own DDP copy of the model (same weights, same batches, SGD),
interleaved step by step, one torch thread a rank: bare DDP, and DDP under
``watch(model, opt, update_ratio=False)``. The noise scale's own work is timed where it runs
(``time.thread_time``, rank 0's training thread): the parameters' gradient hooks, the
end-of-backward read of the rank's own gradients with its all-reduce (CPU only: the wait for the
other rank is not counted), the forward hooks (with ``--noise-every``: the DDP module's pre-hook
turning the cadence at each step's first forward), and ``take`` at the step; "auto" measures its
own arm's CPU only (``ArmClock``), not the bare arm's steps in between. Printed: that CPU
over the bare DDP step's CPU (median over rounds: a step on average, the steps with and without
the capture together), its parts, and the cadence in force at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from arm_clock import ArmClock  # bench/arm_clock.py: one arm's CPU

WORKLOADS = ("digits", "transformer")


def workload_of(name: str):
    from gradexplorer.core.model.examples import digits, transformer

    return digits.build({"batch": "64"}, 0) if name == "digits" else transformer.build({}, 0)


def step(model, opt, loss_fn, batch, m: int) -> None:
    inputs, target = batch
    size = inputs.shape[0] // m
    for i in range(m):
        part = slice(i * size, (i + 1) * size)
        with model.no_sync() if i < m - 1 else contextlib.nullcontext():
            (loss_fn(model(inputs[part]), target[part]) / m).backward()
    opt.step()
    opt.zero_grad()


PARTS = {"_on_grad": "hooks", "_done": "read + reduce", "_on_forward": "hooks",
         "_on_output": "hooks", "take": "take"}


def timed(clock: dict, part: str, work):
    def run(*args, **kwargs):
        start = time.thread_time()
        try:
            return work(*args, **kwargs)
        finally:
            clock[part] += time.thread_time() - start
    return run


def rank_main(rank, world, port, names, steps, rounds, m, out, every):
    from torch.nn.parallel import DistributedDataParallel

    from gradexplorer.core.watch import noise_ranks as NR
    from gradexplorer.core.watch import noise_watch as NW
    from gradexplorer.core.watch.recorder import watch

    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    clock = dict.fromkeys(PARTS.values(), 0.0)
    for cls, name in ((NR.RankCapture, "_on_grad"), (NR.RankCapture, "_done"),
                      (NR.RankCapture, "_on_forward"), (NW, "_on_output"),  # (a function)
                      (NR.RankNoiseWatch, "take")):  # bound when the hooks are made
        setattr(cls, name, timed(clock, PARTS[name], getattr(cls, name)))
    try:
        for name in names:
            workload = workload_of(name)
            bare = DistributedDataParallel(workload.model)
            watched = DistributedDataParallel(copy.deepcopy(workload.model))
            bare_opt = torch.optim.SGD(bare.parameters(), lr=0.01)
            opt = torch.optim.SGD(watched.parameters(), lr=0.01)
            ratios, parts = [], []
            arm = ArmClock()
            with watch(watched, opt, update_ratio=False, noise_every=every) as rec:
                if rec.noise.cadence is not None and rec.noise.cadence.auto:
                    rec.noise.cadence.clock = arm
                for s in range(2):  # warm both arms (the kernels, the probe's proof)
                    batch = workload.make_batch(s * world + rank)
                    step(bare, bare_opt, workload.loss_fn, batch, m)
                    arm.begin()
                    step(watched, opt, workload.loss_fn, batch, m)
                    arm.end()
                for r in range(rounds):
                    spent = 0.0
                    clock.update(dict.fromkeys(clock, 0.0))
                    for s in range(steps):
                        batch = workload.make_batch(((r + 1) * steps + s) * world + rank)
                        start = time.thread_time()
                        step(bare, bare_opt, workload.loss_fn, batch, m)
                        spent += time.thread_time() - start
                        arm.begin()
                        step(watched, opt, workload.loss_fn, batch, m)
                        arm.end()
                    ratios.append(sum(clock.values()) / spent)
                    parts.append({k: v / spent for k, v in clock.items()})
                latest, used = rec.noise.latest, rec.noise.capture.used
                cadence = rec.noise.cadence
            if rank == 0:
                middle = parts[ratios.index(statistics.median_low(ratios))]
                out.put((f"{name} [{used}]", statistics.median(ratios), middle,
                         latest.smoothed.b_simple if latest else float("nan"),
                         1 if cadence is None else cadence.every))
    finally:
        dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(WORKLOADS))
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--micro", type=int, default=1, help="micro-batches a rank a step")
    parser.add_argument("--noise-every", default="1", help='watch\'s noise_every: N or "auto"')
    args = parser.parse_args()
    every = args.noise_every if args.noise_every == "auto" else int(args.noise_every)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = mp.get_context("spawn").SimpleQueue()
    print(f"noise scale's CPU per step / bare DDP step's (2 gloo ranks, {args.micro} backward(s) "
          f"a rank, noise_every={every}, median of {args.rounds} rounds × {args.steps} steps, "
          "rank 0's thread)")
    names = args.models.split(",")
    mp.spawn(rank_main, args=(2, port, names, args.steps, args.rounds, args.micro, out, every),
             nprocs=2, join=True)
    for _ in names:
        name, ratio, parts, b_simple, now = out.get()
        detail = ", ".join(f"{k} {v:.2%}" for k, v in parts.items())
        print(f"  {name:20s} {ratio:7.2%}   ({detail}; smoothed B_simple at the end: "
              f"{b_simple:.4g}; N at the end {now})")


if __name__ == "__main__":
    main()
