"""Where a light step of ``watch(..., overhead=0.05)`` spends its CPU on ResNet-18 (8×3×64×64),
with and without a run directory: the training thread inside watch's optimizer hooks and the
run writer's thread, by ``time.thread_time`` on each and cProfile on each (issue 42).

    python bench/light_steps.py                   # 50 light steps, run directory
    python bench/light_steps.py --steps 50 --profile 25

Every step after the warm-up is made light (the budget's cadence held at its rarest), so the
figures are those of the steps the budget's arm spends nearly all its time in.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import watch_floor as F  # noqa: E402 - ready_kernels, HookClock
import workloads as W  # noqa: E402

import gradexplorer as gx  # noqa: E402
from gradexplorer.core.watch import budget as B  # noqa: E402


def writer_clock(rec):
    writes = rec.writer._writes
    writes.flush()
    return time.clock_gettime(time.pthread_getcpuclockid(writes._thread.ident))


def profiled_writer(rec, profile: cProfile.Profile) -> None:
    """cProfile of the writer thread's commits (enabled there, around each batch)."""
    writes = rec.writer._writes
    commit = writes._commit

    def run(batch):
        profile.enable()
        try:
            return commit(batch)
        finally:
            profile.disable()
    writes._commit = run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=12)
    parser.add_argument("--profile", type=int, default=25,
                        help="functions printed per thread (0: no profile)")
    parser.add_argument("--sort", default="tottime")
    parser.add_argument("--period", type=float, help="the writer's write_thread.PERIOD (seconds)")
    parser.add_argument("--memory", action="store_true", help="no run directory")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.period is not None:
        from gradexplorer.core.runs import write_thread

        write_thread.PERIOD = args.period
    model, batch, loss_fn = W.build("resnet18")
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    folder = tempfile.mkdtemp(prefix="gradexplorer-light-")
    rec = gx.watch(model, opt, None if args.memory else folder + "/run", overhead=0.05)
    clock = F.HookClock(opt)
    F.ready_kernels()

    def step(i):
        inputs, target = W.to(batch(i), "cpu")
        opt.zero_grad()
        W.loss_of(model, inputs, target, loss_fn).backward()
        opt.step()
    for i in range(args.warmup):
        step(i)
    rec.budget._choose = lambda _step: None  # every step from here light
    rec.budget.every = B.MAX_EVERY
    step(args.warmup)
    heavy = rec.budget.heavy_steps
    clock.take()
    train_profile, writer_profile = (cProfile.Profile(time.thread_time) for _ in range(2))
    wrote = 0.0 if args.memory else writer_clock(rec)
    if not args.memory and args.profile:
        profiled_writer(rec, writer_profile)
    hooks = []
    for i in range(args.steps):
        step(args.warmup + 1 + i)
        hooks.append(clock.take())
    wrote = 0.0 if args.memory else writer_clock(rec) - wrote
    assert rec.budget.heavy_steps == heavy, "a heavy step among the counted"
    # the same steps again under cProfile (training thread), for where the time goes
    for hook in (opt._optimizer_step_pre_hooks, opt._optimizer_step_post_hooks):
        for key, fn in hook.items():
            def profiled(*a, _fn=fn, **k):
                train_profile.enable()
                try:
                    return _fn(*a, **k)
                finally:
                    train_profile.disable()
            hook[key] = profiled
    for i in range(args.steps if args.profile else 0):
        step(args.warmup + 1 + args.steps + i)
    if not args.memory:
        rec.writer.flush()
    rec.close()
    hooks.sort()
    n = args.steps
    print(f"load {open('/proc/loadavg').read().split()[:3]}; {n} light steps of ResNet-18 8x3x64x64")
    q = [hooks[k] * 1e3 for k in (n // 4, n // 2, 3 * n // 4)]
    print(f"training thread in watch's hooks: median {q[1]:.2f} ms, mean "
          f"{sum(hooks) / n * 1e3:.2f} ms (quartiles {q[0]:.2f}-{q[2]:.2f})")
    if not args.memory:
        print(f"writer thread: {wrote / n * 1e3:.2f} ms a step")
    for name, profile in (("training thread (hooks)", train_profile), ("writer thread", writer_profile)):
        if not args.profile or (args.memory and profile is writer_profile):
            continue
        out = io.StringIO()
        stats = pstats.Stats(profile, stream=out)
        stats.sort_stats(args.sort).print_stats(args.profile)
        print(f"--- {name}: cProfile over {n} steps, by own time")
        print("\n".join(out.getvalue().splitlines()[4:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
