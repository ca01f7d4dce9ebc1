"""The least any per-step gradient monitor with an update ratio costs, beside what watch costs.

    python bench/watch_floor.py                        # the issue's MLP, 3 rounds of 300 steps
    python bench/watch_floor.py --models mlp256 gpt2 --rounds 3 --steps 100

The update ratio ‖Δθ‖/‖θ‖ measured from the weights (what watch records by default) needs two
passes over every weight on the training thread: a copy before ``optimizer.step()`` and a
difference after it, before the loop may change the weights again (WGAN's ``p.data.clamp_``
right after the step, which no version counter sees). Taking the statistics off the training
thread needs a third: the gradients copied before the step (a loop may change ``.grad`` in place
after it). This bench times those passes alone, by the kernels watch uses for them
(``backend_at.UpdateCopies``: one Numba call a pass for every tensor, read in place into a kept
flat buffer; torch's ``_foreach_copy_``/``_foreach_sub``/``_foreach_norm`` took 0.45 ms where
these take 0.2 on the MLP), as step hooks on a loop of their own, nothing else computed, side by
side with the bare loop and with
``gradexplorer.watch`` (in memory, with and without its update ratio), every method interleaved
step by step in one process (``recorder.py``'s loops and models). The fixed cost is each
method's median step minus the bare loop's, by the wall clock and by the training thread's CPU.
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

import recorder as R  # noqa: E402 - bench/recorder.py: the models and the loss

import gradexplorer as gx  # noqa: E402

RATIO = "update ratio's passes"  # the weights copied before the step, their difference after
RATIO_AND_COPY = "+ gradients' copy"  # and the gradients copied before the step
WATCH = "watch, in memory"
WATCH_NO_RATIO = "watch, no update ratio"
METHODS = ("bare loop", RATIO, RATIO_AND_COPY, WATCH, WATCH_NO_RATIO)


def passes(model: torch.nn.Module, optimizer, gradients: bool, found: list | None = None) -> list:
    """Step hooks doing only the passes an update ratio (and, with ``gradients``, a gradient
    copy) needs, as watch does them: kept flat copies, ‖Δθ‖ and ‖θ‖ of each parameter (put in
    ``found``, where given)."""
    from gradexplorer.core.stats.backend_at import UpdateCopies

    owners = [p for p in model.parameters() if p.requires_grad]
    params = [p.detach() for p in owners]
    weights, grads = UpdateCopies(), UpdateCopies()

    def before(*_args):
        weights.take(params)
        if gradients:
            grads.take([p.grad for p in owners])

    def after(*_args):
        norms = weights.update_norms(params)
        if found is not None:
            found.append(norms)
    return [optimizer.register_step_pre_hook(before), optimizer.register_step_post_hook(after)]


def measure(name: str, rounds: int, steps: int) -> dict:
    """Median step seconds (wall clock, training thread CPU) of every method on model ``name``."""
    model, batch, loss_fn = R.build(name)
    setups, handles, recorders = {}, [], []
    for method in METHODS:
        m = copy.deepcopy(model)
        opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
        if method in (RATIO, RATIO_AND_COPY):
            handles += passes(m, opt, method == RATIO_AND_COPY)
        elif method in (WATCH, WATCH_NO_RATIO):
            recorders.append(gx.watch(m, opt, update_ratio=method == WATCH))
        setups[method] = (m, opt)
    times, cpu = ({method: [] for method in METHODS} for _ in range(2))
    step = 0
    for _ in range(rounds + 1):  # the first round warms up and is dropped
        for _ in range(steps):
            for method, (m, opt) in setups.items():
                inputs, target = R.to(batch(step), "cpu")
                start, start_cpu = time.perf_counter(), time.thread_time()
                opt.zero_grad()
                R.loss_of(m, inputs, target, loss_fn).backward()
                opt.step()
                times[method].append(time.perf_counter() - start)
                cpu[method].append(time.thread_time() - start_cpu)
            step += 1
    for handle in handles:
        handle.remove()
    ratios = {}  # whether each watch recorded update ratios (the last step's)
    for method, rec in zip((WATCH, WATCH_NO_RATIO), recorders, strict=True):
        ratios[method] = any(r is not None for r in rec.latest().column("update_ratio").values())
        rec.close()
    return {"model": name, "numel": sum(p.numel() for p in model.parameters()), "ratios": ratios,
            "median": {k: statistics.median(t[steps:]) for k, t in times.items()},
            "cpu": {k: statistics.median(t[steps:]) for k, t in cpu.items()}}


def report(result: dict) -> str:
    bare, bare_cpu = result["median"]["bare loop"], result["cpu"]["bare loop"]
    lines = [f"{result['model']} ({result['numel']:,} numbers): bare step {bare * 1e3:.2f} ms",
             f"  {'method':<24} {'median step':>12} {'fixed cost':>11} {'fixed (CPU)':>12}"]
    for method, seconds in result["median"].items():
        lines.append(f"  {method:<24} {seconds * 1e3:9.3f} ms {(seconds - bare) * 1e3:8.3f} ms "
                     f"{(result['cpu'][method] - bare_cpu) * 1e3:9.3f} ms")
    floor = result["median"][RATIO_AND_COPY]
    lines.append(f"  watch above the floor (its fixed cost less the three passes'): "
                 f"{(result['median'][WATCH] - floor) * 1e3:.3f} ms")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["mlp256"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    for name in args.models:
        print(report(measure(name, args.rounds, args.steps)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
