"""Cost of per-parameter gradient statistics + histograms every step, as a share of a bare step.

    python bench/histograms.py                       # resnet18 and transformer, 5 rounds
    python bench/histograms.py --models resnet --rounds 2
    python bench/histograms.py --device cuda --models resnet18,transformer,gpt2,resnet18-224
    python bench/histograms.py --quick --models gpt2,resnet18-224   # small batches on the CPU

Models: any example name, plus ``gpt2`` (GPT-2 124M built by transformers from a GPT2Config,
no download; batch 8 × 256) and ``resnet18-224`` (ResNet-18 at batch 64 × 3 × 224²);
``--quick`` shrinks their batches (2 × 64 tokens, 2 × 224²) to keep CPU runs short.

Every method runs in one process on one session, interleaved step by step (rounds), so load
from other processes hits all of them alike. For each method the table gives the time spent
inside its observer divided by the median bare step (direct, low noise) and the median
end-to-end slowdown of whole steps (noisier). Methods:

- gradexplorer: GradientMonitor (exact stats, 64-bin exact histograms, update ratio), with the
  backend it picks (Numba on the CPU, the fused torch path on a GPU)
- gradexplorer, no update ratio: the same without ‖Δθ‖/‖θ‖ (no parameter copy)
- gradexplorer, fused torch path: the device path forced (the CPU fallback without Numba;
  on CUDA with Triton, the two Triton kernels); skipped on the CPU above 50M gradient values
  (its float64 temporaries would not fit here)
- gradexplorer, eager fused path: on CUDA with Triton only, the fused path with the Triton
  kernels turned off (what CUDA runs without Triton)
- gradexplorer, side stream / same stream: on CUDA only, ``GradientMonitor(overlap=True)``
  (the statistics on a side stream beside the optimizer step) and the default beside it, both
  timed WITHOUT the device wait the other methods get after each observer call (that wait
  would remove the overlap being measured): their "in observer" is host time only; compare
  their end-to-end columns with each other (more rounds help: ``--rounds 30``)
- TensorBoard-style: ``.cpu().numpy()``, ``np.histogram(64)``, min/max/sum/sum of squares
- wandb-style: ``clone``, finite filter, per-parameter ``.item()`` min/max, ``torch.histc(64)``
- torch._foreach_norm: norms alone, for scale
- watch: as-accumulated norms: the point ``watch`` adds to each recorded step, timed inside
  backward where it runs, in this loop, which leaves ``.grad`` alone between backward and step:
  measured at both points until proven (3 steps), then the applied norms taken over (one hook,
  a version check; every 50th step measured again); target: ≤ 1% of a bare step. Not counted:
  the first read of each ``.grad`` after backward, which the applied point pays anyway when it
  comes first (see bench/accumulated_point.py)
- watch: accumulated, every step: the same point measured at every step (hooks on every
  parameter, float64 norms at the end of backward), as in a loop that clips or unscales

Besides time, one extra step per method counts the aten ops its observer dispatches (a
TorchDispatchMode) and its host synchronisations: on CUDA the warnings of
``torch.cuda.set_sync_debug_mode``; on the CPU, where nothing waits, the scalar reads
(``aten._local_scalar_dense``, i.e. ``.item()``) that would be syncs on a device.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # accumulated_point, beside this file

from accumulated_point import AccumulatedPoint  # noqa: E402  (bench/, beside this file)
from torch import nn  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from gradexplorer import TrainingSession  # noqa: E402
from gradexplorer import load_workload as _load  # noqa: E402
from gradexplorer.core.model.spec import ModelOptions  # noqa: E402
from gradexplorer.core.model.workload import Workload  # noqa: E402
from gradexplorer.core.stats.backends.registry import TorchBackend  # noqa: E402
from gradexplorer.core.stats.backends.triton import stats as triton_stats  # noqa: E402
from gradexplorer.session import GradientMonitor, SessionConfig  # noqa: E402

FUSED_CPU_LIMIT = 50_000_000  # gradient values: above this the fused path is skipped on CPU
UNSETTLED = ("gradexplorer, side stream", "gradexplorer, same stream")  # timed end to end


class OpCounter(TorchDispatchMode):
    """Aten ops dispatched while active, and scalar reads (``.item()``) among them."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))


class SyncCounter:
    """CUDA synchronisations reported by ``torch.cuda.set_sync_debug_mode("warn")``."""

    def __init__(self, device: str) -> None:
        self.cuda, self.count = device.startswith("cuda"), 0

    def __enter__(self):
        if self.cuda:
            self._catch = warnings.catch_warnings(record=True)
            self._seen = self._catch.__enter__()
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
        return self

    def __exit__(self, *exc):
        if self.cuda:
            torch.cuda.set_sync_debug_mode(0)
            self.count += sum("synchroniz" in str(w.message) for w in self._seen)
            self._catch.__exit__(*exc)


class Timed:
    """Wraps an observer and adds up the seconds spent in it during one step; with
    ``counting`` set it also counts its aten ops and host synchronisations."""

    def __init__(self, inner, device: str = "cpu", settle: bool = True) -> None:
        self.inner, self.seconds, self.device = inner, 0.0, device
        self.settle = settle  # wait for the device after each call (its queued work is timed)
        self.counting, self.ops, self.syncs = False, Counter(), 0
        if hasattr(inner, "timed"):  # an observer whose work also runs inside backward
            inner.timed = self

    def _call(self, name, *args):
        method = getattr(self.inner, name, None)
        if method is None:
            return
        if self.counting:
            self._count(method, args)
            return
        start = time.perf_counter()  # nothing but the call between the two reads of the clock
        method(*args)
        if self.settle and self.device.startswith("cuda"):
            torch.cuda.synchronize()  # the time of work queued by this observer is its own
        self.seconds += time.perf_counter() - start + getattr(self.inner, "elsewhere", 0.0)
        self.inner.elsewhere = 0.0  # work it did inside backward (AccumulatedPoint)

    def _count(self, method, args) -> None:
        """The counted step: aten ops and host synchronisations (not timed)."""
        with ExitStack() as stack:
            counter = stack.enter_context(OpCounter())
            syncs = stack.enter_context(SyncCounter(self.device))
            method(*args)
        self.ops += counter.ops
        self.syncs += syncs.count if syncs.cuda else counter.ops["aten._local_scalar_dense"]
        self.inner.elsewhere = 0.0

    def after_backward(self, session, step):
        self._call("after_backward", session, step)

    def after_step(self, session, result):
        self._call("after_step", session, result)


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


def eager_fused_monitor() -> GradientMonitor:
    """The fused torch path with its Triton kernels off (the monitor builds its backend lazily)."""
    monitor = GradientMonitor(bins=64, histogram_every=1, backend="torch")
    monitor._backend = TorchBackend(triton=False)
    return monitor


METHODS = {
    "bare step": None,
    "gradexplorer": lambda: GradientMonitor(bins=64, histogram_every=1),
    "gradexplorer, no update ratio": lambda: GradientMonitor(bins=64, histogram_every=1, update_ratio=False),
    "gradexplorer, fused torch path": lambda: GradientMonitor(bins=64, histogram_every=1, backend="torch"),
    "gradexplorer, eager fused path": eager_fused_monitor,
    "gradexplorer, side stream": lambda: GradientMonitor(bins=64, histogram_every=1, overlap=True),
    "gradexplorer, same stream": lambda: GradientMonitor(bins=64, histogram_every=1),
    "TensorBoard-style": TensorBoardStyle,
    "wandb-style": WandbStyle,
    "torch._foreach_norm only": ForeachNorm,
    "watch: as-accumulated norms": lambda: AccumulatedPoint(OpCounter),
    "watch: accumulated, every step": lambda: AccumulatedPoint(OpCounter, reuse=False),
}


class LanguageModel(nn.Module):
    """A transformers causal LM returning logits only."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.inner(ids).logits


def gpt2_workload(batch: int, tokens: int, **config_overrides) -> Workload:
    """GPT-2 124M from a GPT2Config (random weights, no download) on fixed random tokens."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(**config_overrides)
    model = LanguageModel(GPT2LMHeadModel(config))
    ids = torch.randint(0, config.vocab_size, (batch, tokens))

    def loss(logits, target):
        return nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                           target[:, 1:].reshape(-1))

    return Workload(model, lambda step: (ids, ids), loss, "gpt2",
                    f"GPT-2 124M, batch {batch} × {tokens} tokens")


def load_workload(name: str, quick: bool = False) -> Workload:
    """``gpt2``, ``resnet18-224`` or an example name (``example:`` optional)."""
    if name == "gpt2":
        return gpt2_workload(*((2, 64) if quick else (8, 256)))
    if name == "resnet18-224":
        return _load(f"example:resnet18:batch={2 if quick else 64},size=224", ModelOptions())
    spec = name if ":" in name else f"example:{name}"
    return _load(spec, ModelOptions())


def make_session(spec: str, device: str, quick: bool = False) -> TrainingSession:
    config = SessionConfig(device=device, optimizer="sgd", momentum=0.9, grad_norm=False)
    return TrainingSession(load_workload(spec, quick), config)


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


def skip_reason(name: str, device: str, numel: int) -> str | None:
    """Why ``name`` is not measured here (None: it is)."""
    if name == "gradexplorer, fused torch path" and device == "cpu" and numel > FUSED_CPU_LIMIT:
        return f"skipped on the CPU above {FUSED_CPU_LIMIT:,} values"
    if name == "gradexplorer, eager fused path" and not (
            device.startswith("cuda") and triton_stats.usable(device)):
        return "skipped: the same as the fused torch path without Triton on CUDA"
    if name in UNSETTLED and not device.startswith("cuda"):
        return "skipped: CUDA only (no streams elsewhere)"
    return None



def observe_only(session, observer) -> None:
    """``session`` observed by ``observer`` alone (None: by nothing)."""
    for other in session.observers:
        session.remove_observer(other)
    if observer is not None:
        session.add_observer(observer)

def measure(spec: str, rounds: int, device: str, quick: bool = False) -> dict:
    """Per method: observer seconds and whole-step seconds for each round, ops and syncs."""
    session = make_session(spec, device, quick)
    numel = sum(p.numel() for p in session.model.parameters())
    methods = [name for name in METHODS if skip_reason(name, device, numel) is None]
    observers = {name: (Timed(METHODS[name](), device, settle=name not in UNSETTLED)
                         if METHODS[name] else None) for name in methods}
    for obs in observers.values():  # warm-up: compile kernels, fill caches
        observe_only(session, obs)
        session.step()
    for obs in observers.values():  # one counted step each
        if obs:
            obs.counting = True
            observe_only(session, obs)
            session.step()
            obs.counting = False
    cpu = {name: [] for name in methods}  # process CPU time of each step
    steps = {name: [] for name in methods}
    inside = {name: [] for name in methods}
    passes: list[float] = []
    rng = np.random.default_rng(0)
    for _ in range(rounds):
        for name in rng.permutation(methods):
            obs = observers[name]
            observe_only(session, obs)
            if obs:
                obs.seconds = 0.0
            start, cpu_start = time.perf_counter(), time.process_time()
            session.step()
            steps[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - cpu_start)
            inside[name].append(obs.seconds if obs else 0.0)
            passes.append(one_pass_seconds(session))
    observe_only(session, None)
    numel = sum(g.numel() for g in grads_of(session))
    ops = {n: sum(o.ops.values()) for n, o in observers.items() if o}
    syncs = {n: o.syncs for n, o in observers.items() if o}
    return {"spec": spec, "steps": steps, "cpu": cpu, "inside": inside, "numel": numel, "ops": ops,
            "syncs": syncs, "params": len(grads_of(session)), "pass": statistics.median(passes),
            "device": device, "description": session.workload.description}


def report(result: dict) -> str:
    bare = statistics.median(result["steps"]["bare step"])
    bare_cpu = statistics.median(result["cpu"]["bare step"]) if result["device"] == "cpu" else None
    mb = result["numel"] * 4 / 1e6
    lines = [
        f"{result['spec']} ({result['description']}, {result['device']}): "
        f"{result['params']} gradients, {result['numel']:,} numbers "
        f"({mb:.1f} MB); bare step {bare * 1000:.1f} ms"
        + (f" (CPU time {bare_cpu * 1000:.1f} ms)" if bare_cpu else "")
        + f"; one read pass over all gradients {result['pass'] * 1000:.2f} ms (medians)",
        f"  {'method':32s} {'in observer':>12s} {'% of bare':>10s} {'best':>7s} {'% of CPU':>9s} "
        f"{'end-to-end':>11s} {'read passes':>12s} {'aten ops':>9s} {'syncs':>6s}",
    ]
    bare_best = min(result["steps"]["bare step"])
    for name in METHODS:
        if name == "bare step":
            continue
        if name not in result["inside"]:
            why = skip_reason(name, result["device"], result["numel"]) or "skipped"
            lines.append(f"  {name:32s} {why}")
            continue
        inside = statistics.median(result["inside"][name])
        whole = statistics.median(result["steps"][name])
        passes = inside / result["pass"] if result["pass"] > 0 else float("nan")
        best = min(result["inside"][name]) / bare_best
        of_cpu = f"{100 * inside / bare_cpu:8.2f}%" if bare_cpu else f"{'-':>9s}"
        lines.append(
            f"  {name:32s} {inside * 1000:9.2f} ms {100 * inside / bare:9.1f}% {100 * best:6.1f}% "
            f"{of_cpu} "
            f"{100 * (whole - bare) / bare:10.1f}% {passes:11.1f}× {result['ops'][name]:9d} "
            f"{result['syncs'][name]:6d}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet18,transformer",
                        help="comma-separated example names (default resnet18,transformer)")
    parser.add_argument("--rounds", type=int, default=5, help="steps per method (default 5)")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--quick", action="store_true",
                        help="small batches for gpt2 and resnet18-224 (CPU runs)")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {args.device}, "
          f"SGD momentum 0.9, {args.rounds} interleaved rounds")
    for name in args.models.split(","):
        print(report(measure(name.strip(), args.rounds, args.device, args.quick)), flush=True)
    print("in observer: median time inside the method's observer; % of bare: that over the median\n"
          "bare step; best: fastest observer time over fastest bare step; % of CPU (CPU runs): in\n"
          "observer over the median CPU time of a bare step, which other processes' load stretches\n"
          "less than its wall time (under load % of bare reads low; the observer's own time is wall\n"
          "time, so only short observers, rarely preempted, read true there); end-to-end: median\n"
          "whole-step slowdown (noisy under load); read passes: observer time in units of one plain read\n"
          "(a sum) of every gradient. The single-pass floor is 1.0x. aten ops: dispatched by the\n"
          "observer in one step (TorchDispatchMode); syncs: host synchronisations in that step\n"
          "(CUDA: set_sync_debug_mode warnings; CPU: .item() scalar reads). Side/same stream\n"
          "(CUDA): timed without a device wait after each call, so 'in observer' is host time\n"
          "only: compare their end-to-end columns with each other.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
