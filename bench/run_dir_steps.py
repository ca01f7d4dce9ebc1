"""What a run directory adds to the default ``watch`` step on ResNet-18 (8×3×64×64), thread by
thread: two copies of the model, one watched in memory and one with a run directory, stepped
alternately in one process (one torch thread), and each step's CPU of the training thread inside
watch's optimizer hooks, of the statistics worker and of the run's writer thread
(``time.thread_time`` / the threads' CPU clocks; issue 42).

    python bench/run_dir_steps.py                 # 20 counted steps of each
    python bench/run_dir_steps.py --profile 30    # then cProfile of the training thread's hooks
    GRADEXPLORER_STATS_WORKER=0 python bench/run_dir_steps.py   # everything on the training thread

With ``--profile`` the same steps are run again under cProfile (the training thread's hooks of
each arm, and the writer's transactions), for where the difference goes.
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import io
import os
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import recorder as R  # noqa: E402 - worker_cpu, writer_cpu
import watch_floor as F  # noqa: E402 - ready_kernels, HookClock
import workloads as W  # noqa: E402
from light_steps import profiled_writer  # noqa: E402 - the writer thread under cProfile

import gradexplorer as gx  # noqa: E402

ARMS = ("in memory", "run directory")


def profiled_hooks(opt, profile: cProfile.Profile) -> None:
    """Every step hook of ``opt`` run under ``profile``."""
    for hooks in (opt._optimizer_step_pre_hooks, opt._optimizer_step_post_hooks):
        for key, hook in hooks.items():
            def run(*args, _hook=hook, **kwargs):
                profile.enable()
                try:
                    return _hook(*args, **kwargs)
                finally:
                    profile.disable()
            hooks[key] = run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=6)
    parser.add_argument("--profile", type=int, default=0, help="functions printed (0: no profile)")
    parser.add_argument("--sort", default="tottime")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    model, batch, loss_fn = W.build("resnet18")
    folder = tempfile.mkdtemp(prefix="gradexplorer-run-dir-steps-")
    arms = {}
    for name in ARMS:
        m = copy.deepcopy(model)
        opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
        rec = gx.watch(m, opt, None if name == ARMS[0] else os.path.join(folder, "run"))
        arms[name] = (m, opt, rec, F.HookClock(opt))
    F.ready_kernels()

    def step(name: str, i: int) -> None:
        m, opt, _, _ = arms[name]
        inputs, target = W.to(batch(i), "cpu")
        opt.zero_grad()
        W.loss_of(m, inputs, target, loss_fn).backward()
        opt.step()

    for i in range(args.warmup):
        for name in ARMS:
            step(name, i)
    hooks = {name: [] for name in ARMS}
    start = {}
    for name, (_, _, rec, clock) in arms.items():
        clock.take()
        start[name] = (R.worker_cpu(rec), R.writer_cpu(rec))
    for i in range(args.steps):
        for name in ARMS:
            step(name, args.warmup + i)
            hooks[name].append(arms[name][3].take())
    n = args.steps
    print(f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {n} steps of each, "
          f"ResNet-18 8x3x64x64, SGD momentum 0.9, 1 torch thread")
    totals = {}
    for name, (_, _, rec, _) in arms.items():
        worker = (R.worker_cpu(rec) - start[name][0]) / n
        writer = (R.writer_cpu(rec) - start[name][1]) / n
        hook = statistics.median(hooks[name])
        totals[name] = hook + worker + writer
        print(f"  {name:<14} training thread in hooks {hook * 1e3:6.2f} ms (median), statistics "
              f"worker {worker * 1e3:5.2f} ms, writer {writer * 1e3:5.2f} ms: "
              f"{totals[name] * 1e3:6.2f} ms a step")
    extra = totals[ARMS[1]] - totals[ARMS[0]]
    print(f"  the run directory's own cost: {extra * 1e3:.2f} ms a step")
    if args.profile:
        profiles = {name: cProfile.Profile(time.thread_time) for name in (*ARMS, "writer")}
        for name, (_, opt, _, _) in arms.items():
            profiled_hooks(opt, profiles[name])
        profiled_writer(arms[ARMS[1]][2], profiles["writer"])
        for i in range(n):
            for name in ARMS:
                step(name, args.warmup + n + i)
        arms[ARMS[1]][2].writer.flush()
        for name, profile in profiles.items():
            out = io.StringIO()
            pstats.Stats(profile, stream=out).sort_stats(args.sort).print_stats(args.profile)
            where = "the writer thread" if name == "writer" else f"the training thread's hooks, {name}"
            print(f"--- {where}: cProfile over {n} steps")
            print("\n".join(out.getvalue().splitlines()[4:]))
    for _, _, rec, _ in arms.values():
        rec.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
