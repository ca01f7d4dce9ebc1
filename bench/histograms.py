"""Cost of per-parameter gradient statistics + histograms every step, as a share of a bare step.

    python bench/histograms.py                       # resnet18 and transformer, 5 rounds
    python bench/histograms.py --models resnet --rounds 2

Every method runs in one process on one session, interleaved step by step (rounds), so load
from other processes hits all of them alike. For each method the table gives the time spent
inside its observer divided by the median bare step (direct, low noise) and the median
end-to-end slowdown of whole steps (noisier). Methods:

- gradexplorer: GradientMonitor (exact stats, 64-bin exact histograms, update ratio)
- gradexplorer, no update ratio: the same without ‖Δθ‖/‖θ‖ (no parameter copy)
- TensorBoard-style: ``.cpu().numpy()``, ``np.histogram(64)``, min/max/sum/sum of squares
- wandb-style: ``clone``, finite filter, per-parameter ``.item()`` min/max, ``torch.histc(64)``
- torch._foreach_norm: norms alone, for scale
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gradexplorer.core.model.spec import ModelOptions, load_workload  # noqa: E402
from gradexplorer.core.session.engine import SessionConfig, TrainingSession  # noqa: E402
from gradexplorer.core.stats.monitor import GradientMonitor  # noqa: E402


class Timed:
    """Wraps an observer and adds up the seconds spent in it during one step."""

    def __init__(self, inner) -> None:
        self.inner, self.seconds = inner, 0.0

    def after_backward(self, session, step):
        start = time.perf_counter()
        if hasattr(self.inner, "after_backward"):
            self.inner.after_backward(session, step)
        self.seconds += time.perf_counter() - start

    def after_step(self, session, result):
        start = time.perf_counter()
        if hasattr(self.inner, "after_step"):
            self.inner.after_step(session, result)
        self.seconds += time.perf_counter() - start


def grads_of(session):
    return [p.grad for p in session.model.parameters() if p.grad is not None]


class TensorBoardStyle:
    """What ``SummaryWriter.add_histogram`` does per parameter (numpy on the host)."""

    def after_backward(self, session, step):
        for g in grads_of(session):
            values = g.detach().cpu().numpy().reshape(-1)
            counts, limits = np.histogram(values, bins=64)
            _ = values.min(), values.max(), values.sum(), values.dot(values), counts, limits


class WandbStyle:
    """What wandb's torch gradient hook does per parameter."""

    def after_backward(self, session, step):
        for g in grads_of(session):
            flat = g.detach().reshape(-1).clone()
            flat = flat[torch.isfinite(flat)]
            lo, hi = flat.min().item(), flat.max().item()
            counts = torch.histc(flat, bins=64, min=lo, max=hi)
            _ = counts.cpu(), torch.linspace(lo, hi, 65)


class ForeachNorm:
    """Per-parameter L2 norms only, with one host transfer."""

    def after_backward(self, session, step):
        torch.stack(torch._foreach_norm(grads_of(session))).cpu()


METHODS = {
    "bare step": None,
    "gradexplorer": lambda: GradientMonitor(bins=64, every=1),
    "gradexplorer, no update ratio": lambda: GradientMonitor(bins=64, every=1, update_ratio=False),
    "TensorBoard-style": TensorBoardStyle,
    "wandb-style": WandbStyle,
    "torch._foreach_norm only": ForeachNorm,
}


def make_session(spec: str, device: str) -> TrainingSession:
    workload = load_workload(spec, ModelOptions())
    config = SessionConfig(device=device, optimizer="sgd", momentum=0.9, grad_norm=False)
    return TrainingSession(workload, config)


def one_pass_seconds(session) -> float:
    """Time of one plain read pass (a sum) over every gradient: the memory-pass yardstick."""
    grads = grads_of(session)
    start = time.perf_counter()
    if grads[0].device.type == "cpu":
        for g in grads:
            g.detach().numpy().sum()
    else:
        torch.stack([g.sum() for g in grads]).cpu()
    return time.perf_counter() - start


def measure(spec: str, rounds: int, device: str) -> dict:
    """Per method: observer seconds and whole-step seconds for each round."""
    session = make_session(spec, device)
    observers = {name: (Timed(make()) if make else None) for name, make in METHODS.items()}
    for obs in observers.values():  # warm-up: compile kernels, fill caches
        session.observers = [obs] if obs else []
        session.step()
    steps = {name: [] for name in METHODS}
    inside = {name: [] for name in METHODS}
    passes: list[float] = []
    rng = np.random.default_rng(0)
    for _ in range(rounds):
        for name in rng.permutation(list(METHODS)):
            obs = observers[name]
            session.observers = [obs] if obs else []
            if obs:
                obs.seconds = 0.0
            start = time.perf_counter()
            session.step()
            steps[name].append(time.perf_counter() - start)
            inside[name].append(obs.seconds if obs else 0.0)
            passes.append(one_pass_seconds(session))
    session.observers = []
    numel = sum(g.numel() for g in grads_of(session))
    return {"spec": spec, "steps": steps, "inside": inside, "numel": numel,
            "params": len(grads_of(session)), "pass": statistics.median(passes)}


def report(result: dict) -> str:
    bare = statistics.median(result["steps"]["bare step"])
    mb = result["numel"] * 4 / 1e6
    lines = [
        f"{result['spec']}: {result['params']} gradients, {result['numel']:,} numbers "
        f"({mb:.1f} MB); bare step {bare * 1000:.1f} ms; one read pass over all "
        f"gradients {result['pass'] * 1000:.2f} ms (medians)",
        f"  {'method':32s} {'in observer':>12s} {'% of bare':>10s} {'best':>7s} "
        f"{'end-to-end':>11s} {'read passes':>12s}",
    ]
    bare_best = min(result["steps"]["bare step"])
    for name in METHODS:
        if name == "bare step":
            continue
        inside = statistics.median(result["inside"][name])
        whole = statistics.median(result["steps"][name])
        passes = inside / result["pass"] if result["pass"] > 0 else float("nan")
        best = min(result["inside"][name]) / bare_best
        lines.append(
            f"  {name:32s} {inside * 1000:9.1f} ms {100 * inside / bare:9.1f}% {100 * best:6.1f}% "
            f"{100 * (whole - bare) / bare:10.1f}% {passes:11.1f}×"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet18,transformer",
                        help="comma-separated example names (default resnet18,transformer)")
    parser.add_argument("--rounds", type=int, default=5, help="steps per method (default 5)")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {args.device}, "
          f"SGD momentum 0.9, {args.rounds} interleaved rounds")
    for name in args.models.split(","):
        print(report(measure(f"example:{name.strip()}", args.rounds, args.device)), flush=True)
    print("in observer: median time inside the method's observer; % of bare: that over the median\n"
          "bare step; best: fastest observer time over fastest bare step; end-to-end: median\n"
          "whole-step slowdown (noisy under load); read passes: observer time in units of one plain read\n"
          "(a sum) of every gradient. The single-pass floor is 1.0x. gradexplorer reads each\n"
          "gradient twice (moments; then the exact histogram), the rest being arithmetic, and for\n"
          "the update ratio under SGD reads the weights and momentum buffer once after the step.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
