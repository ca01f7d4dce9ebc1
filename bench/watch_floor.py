"""What ``gradexplorer.watch`` costs a step on real workloads, beside its peers and the floor.

    python bench/watch_floor.py --quick     # every standard workload, the slow two shrunk (~10 min)
    python bench/watch_floor.py             # every standard workload at full size (~1 h, 2 cores)
    python bench/watch_floor.py --models resnet18 --rounds 5 --steps 4
    python bench/watch_floor.py --models resnet18 --rounds 4 --steps 12 \
        --arms watch watch-run budget budget-run
    python bench/watch_floor.py --quick --models gpt2-small --arms watch watch-run  # + bare, floor

Workloads (``workloads.py``): torchvision's ResNet-18 at 8×3×64×64 and 32×3×224×224 (``--quick``:
2×3×224×224), GPT-2 tiny (8×32 tokens) and GPT-2 small (8×128; ``--quick``: 2×64) called with
``input_ids=`` and ``labels=``, the MLP 4×256. Every arm trains its own copy of the model (same
weights, same batches, SGD with momentum), all interleaved step by step in one process, one
torch thread (``--threads``), so a machine's load moves them together. Arms (GPT-2 small,
whose eight copies would not fit in 16 GB: all but the update ratio's passes and watch without
an update ratio, ~12 GB):

- bare loop: zero_grad, forward, backward, optimizer.step
- update ratio's passes: step hooks doing only what an exact update ratio ‖Δθ‖/‖θ‖ measured from
  the weights needs: the weights copied before ``optimizer.step()`` and differenced after it,
  before the loop may change them again (WGAN's ``p.data.clamp_`` right after the step, which no
  version counter sees), by watch's own kernels (``numba.in_place.UpdateCopies``)
- floor: those and the gradients' copy that taking the statistics off the training thread
  needs (a loop may change ``.grad`` in place after the step): the least any monitor doing what
  watch does can cost
- watch, in memory / watch, run directory: ``gradexplorer.watch(model, opt[, run_dir])``;
  watch, no update ratio: ``watch(model, opt, update_ratio=False)``
- watch, overhead=5% (in memory, and with a run directory): ``watch(..., overhead=0.05)``, the
  heavy figures on the cadence its budget chooses (``core/watch/budget.py``; each arm's budget
  given a clock of its own steps' CPU, since the arms share one thread): their figures are
  the mean of the counted steps, not the median (one step in ``every`` is heavy), and the
  cadence reached is printed; ``--arms`` runs only some arms beside the bare loop
- TensorBoard-style: what ``SummaryWriter.add_histogram`` of every gradient computes each step
  (``.cpu().numpy()``, ``np.histogram`` of 64 bins, min/max/sum/sum of squares), nothing written
- wandb-style: what ``wandb.watch(model, log="all", log_freq=1)`` hooks do (a 64-bin ``histc``,
  min and max of each gradient, read to the host)

Cost: CPU a step above the bare loop's, all of it: the training thread's CPU inside the
optimizer's step hooks, where every arm but the wandb-style one does its work (``in hooks``:
``time.thread_time``, which other processes' load moves least), plus, for watch, its
statistics worker's and its run directory writer's threads (``recorder.py``'s clocks); the
wandb-style arm's and, beside every arm's, the end-to-end figure: the median step-by-step
difference of the training thread's CPU from the bare loop's (noisier: under load a step's CPU
moves by more than watch costs). Given as a share of the bare step's CPU and in read passes: the
thread CPU of one plain read (a numpy sum) of every gradient, measured every step
(``histograms.py``'s yardstick). Targets (issue 42), from the direct figures: watch above the
floor ≤ 6 read passes on every workload; watch ≤ +5% of the bare step on ResNet-18 at 64×64
(printed for the training thread, and for all of watch's threads). The steady state is
measured: the kernels' warm-up is waited for before the first step (``ready_kernels``; a fresh
process's first steps, measured by the exact fallback meanwhile, are ``first_step.py``'s), and
a first round, on the kernels already, is dropped.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import histograms as H  # noqa: E402 - bench/histograms.py: TensorBoard-style, the read pass
import recorder as R  # noqa: E402 - bench/recorder.py: wandb-style hooks, worker/writer clocks
import workloads as W  # noqa: E402 - bench/workloads.py: the standard workloads
from arm_clock import ArmClock  # noqa: E402 - bench/arm_clock.py: one arm's CPU

import gradexplorer as gx  # noqa: E402

BARE = "bare loop"
RATIO = "update ratio's passes"  # the weights copied before the step, their difference after
FLOOR = "floor (+ gradients' copy)"  # and the gradients copied before the step
WATCH = "watch, in memory"
WATCH_RUN = "watch, run directory"
WATCH_NO_RATIO = "watch, no update ratio"
WATCH_BUDGET = "watch, overhead=5%"  # watch(..., overhead=0.05): the heavy figures on a cadence
WATCH_BUDGET_RUN = "watch, overhead=5%, run dir"
TENSORBOARD = "TensorBoard-style"
WANDB = "wandb-style"
METHODS = (BARE, RATIO, FLOOR, WATCH, WATCH_RUN, WATCH_NO_RATIO, WATCH_BUDGET, WATCH_BUDGET_RUN,
           TENSORBOARD, WANDB)
WATCHES = (WATCH, WATCH_RUN, WATCH_NO_RATIO, WATCH_BUDGET, WATCH_BUDGET_RUN)
BUDGETS = (WATCH_BUDGET, WATCH_BUDGET_RUN)  # amortised: their mean step, not the median
# GPT-2 small's arms, each a copy of 124M weights with their gradients, momentum and watch's
# copies: all eight would need ~16 GB; these six ~12 GB
LEAN = {"gpt2-small": (BARE, FLOOR, WATCH, WATCH_RUN, TENSORBOARD, WANDB)}
PASSES_TARGET, SHARE_TARGET, SHARE_WORKLOAD = 6.0, 0.05, "resnet18"
# ``--arms``: the arms run by these names (the bare loop and the floor always: every figure and
# target is measured from them), so a big workload's arms fit where memory is short
ARMS = {"ratio": RATIO, "watch": WATCH, "watch-run": WATCH_RUN, "watch-no-ratio": WATCH_NO_RATIO,
        "budget": WATCH_BUDGET, "budget-run": WATCH_BUDGET_RUN, "tensorboard": TENSORBOARD,
        "wandb": WANDB}


def passes(model: torch.nn.Module, optimizer, gradients: bool, found: list | None = None) -> list:
    """Step hooks doing only the passes an update ratio (and, with ``gradients``, a gradient
    copy) needs, as watch does them: kept flat copies, ‖Δθ‖ and ‖θ‖ of each parameter (put in
    ``found``, where given)."""
    from gradexplorer.core.stats.backends.numba.in_place import UpdateCopies

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


def tensorboard_style(model: torch.nn.Module, optimizer) -> list:
    """A step pre-hook computing what ``add_histogram`` of every gradient does."""
    held = SimpleNamespace(model=model)
    return [optimizer.register_step_pre_hook(lambda *_: H.TensorBoardStyle().after_backward(held, 0))]


def arm(method: str, model, folder: str):
    """``(model, optimizer, recorder or None, hook handles)`` of one arm, on its own copy."""
    m = copy.deepcopy(model)
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    rec, handles = None, []
    if method in (RATIO, FLOOR):
        handles = passes(m, opt, method == FLOOR)
    elif method in WATCHES:
        run_dir = {WATCH_RUN: "run", WATCH_BUDGET_RUN: "budget-run"}.get(method)
        rec = gx.watch(m, opt, None if run_dir is None else os.path.join(folder, run_dir),
                       update_ratio=method != WATCH_NO_RATIO,
                       overhead=0.05 if method in BUDGETS else None)
    elif method == TENSORBOARD:
        handles = tensorboard_style(m, opt)
    elif method == WANDB:
        handles = R.wandb_style(m)
    return m, opt, rec, handles


def ready_kernels() -> None:
    """Wait for the statistics and spike kernels' warm-up (off the training thread: until it
    ends, watch measures with its exact fallback), so the rounds counted are the steady state
    a long run spends its steps in, not the first seconds of a process."""
    from gradexplorer.core.diagnose import spike_warmup
    from gradexplorer.core.stats.backends import warmup

    warmup.ready()
    warmup.wait()
    spike_warmup.ready()
    spike_warmup.wait()


class HookClock:
    """The training thread's CPU inside an optimizer's step hooks (``time.thread_time``, each
    hook wrapped where it is kept): a direct, low-noise reading of what the hooks of watch, the
    floor's passes and the TensorBoard-style arm cost, beside the end-to-end difference."""

    def __init__(self, optimizer) -> None:
        self.seconds = 0.0
        for hooks in (optimizer._optimizer_step_pre_hooks, optimizer._optimizer_step_post_hooks):
            for key, hook in hooks.items():
                hooks[key] = self._timed(hook)

    def _timed(self, hook):
        def timed(*args, **kwargs):
            start = time.thread_time()
            try:
                return hook(*args, **kwargs)
            finally:
                self.seconds += time.thread_time() - start
        return timed

    def take(self) -> float:
        seconds, self.seconds = self.seconds, 0.0
        return seconds


def measure(name: str, rounds: int, steps: int, quick: bool = False, arms=None) -> dict:
    """Median step seconds (wall clock, training thread CPU) of every method on workload
    ``name`` (``arms``: of those and the bare loop and floor only), the CPU of watch's other
    threads a step, and the read pass's CPU."""
    model, batch, loss_fn = W.build(name, quick)
    folder = tempfile.mkdtemp(prefix="gradexplorer-bench-")
    methods = [m for m in LEAN.get(name, METHODS) if arms is None or m in (BARE, FLOOR, *arms)]
    setups = {method: arm(method, model, folder) for method in methods}
    clocks = {method: HookClock(opt) for method, (_, opt, _, _) in setups.items()}
    arms = {method: ArmClock() for method in methods}
    for method, (_, _, rec, _) in setups.items():
        if rec is not None and rec.budget is not None:
            rec.budget.clock = arms[method]
    times, cpu, hooked = ({method: [] for method in methods} for _ in range(3))
    reads: list[float] = []
    others = {}  # worker + writer CPU of each watch at the end of the warm-up round
    step = 0
    ready_kernels()  # the steady state: the warm-up round already on the kernels (their buffers)
    for round_ in range(rounds + 1):  # the first round warms up (kernels, caches) and is dropped
        if round_ == 1:
            others = {method: (R.worker_cpu(rec), R.writer_cpu(rec),
                               0 if rec.budget is None else rec.budget.heavy_steps)
                      for method, (_, _, rec, _) in setups.items() if rec is not None}
        for _ in range(steps):
            for method, (m, opt, _, _) in setups.items():
                inputs, target = W.to(batch(step), "cpu")
                start, start_cpu = time.perf_counter(), time.thread_time()
                arms[method].begin()
                opt.zero_grad()
                W.loss_of(m, inputs, target, loss_fn).backward()
                opt.step()
                arms[method].end()
                times[method].append(time.perf_counter() - start)
                cpu[method].append(time.thread_time() - start_cpu)
                hooked[method].append(clocks[method].take())
            start = time.thread_time()
            H.one_pass_seconds(SimpleNamespace(model=setups[BARE][0]))
            reads.append(time.thread_time() - start)
            step += 1
    counted = rounds * steps
    writer = {method: (R.writer_cpu(rec) - others[method][1]) / counted
              for method, (_, _, rec, _) in setups.items() if rec is not None}
    threads = {method: (R.worker_cpu(rec) - others[method][0]) / counted + writer[method]
               for method, (_, _, rec, _) in setups.items() if rec is not None}
    ratios, cadence = {}, {}  # whether each watch recorded update ratios; a budget's cadence
    for method, (_, _, rec, handles) in setups.items():
        for handle in handles:
            handle.remove()
        if rec is not None:
            ratios[method] = any(r is not None for r in rec.latest().column("update_ratio").values())
            if rec.budget is not None:
                cadence[method] = (rec.budget.every, rec.budget.changes,
                                   rec.budget.heavy_steps - others[method][2], rec.budget.costs)
            rec.close()
    bare = cpu[BARE][steps:]
    typical = {k: statistics.fmean if k in BUDGETS else statistics.median for k in methods}
    return {"model": name, "numel": sum(p.numel() for p in model.parameters()),
            "params": len(list(model.parameters())), "ratios": ratios, "threads": threads,
            "writer": writer, "cadence": cadence,
            "median": {k: typical[k](t[steps:]) for k, t in times.items()},
            "cpu": {k: typical[k](t[steps:]) for k, t in cpu.items()},
            "above": {k: typical[k]([a - b for a, b in zip(t[steps:], bare, strict=True)])
                      for k, t in cpu.items() if k != BARE},
            "hooks": {k: typical[k](t[steps:]) for k, t in hooked.items()},
            "read": statistics.median(reads[steps:]), "quick": quick}


def costs(result: dict, direct: bool = True) -> dict[str, float]:
    """Each arm's CPU a step above the bare loop's, its other threads' (watch's worker and
    writer) added: ``direct``, the training thread's CPU inside the optimizer's step hooks
    (every arm's work but the wandb-style one, which runs in backward: end to end there);
    else end to end, the median of the step-by-step differences of the training thread's CPU."""
    return {method: (result["hooks"][method] if direct and method != WANDB else above)
            + result["threads"].get(method, 0.0) for method, above in result["above"].items()}


def targets(result: dict) -> list[tuple[str, float, float, bool]]:
    """``(what, figure, target, met)`` of the issue's targets on this workload (direct costs)."""
    cost, read, bare = costs(result), result["read"], result["cpu"][BARE]
    watches = [method for method in (WATCH, WATCH_RUN) if method in cost]
    found = [(f"{method} above the floor, read passes", (cost[method] - cost[FLOOR]) / read,
              PASSES_TARGET) for method in watches if FLOOR in cost]
    if result["model"] == SHARE_WORKLOAD:
        found += [(f"{method}, share of the bare step ({which})", figure / bare, SHARE_TARGET)
                  for method in (*watches, *(b for b in BUDGETS if b in cost))
                  for which, figure in (
                      ("training thread", result["hooks"][method]), ("all threads", cost[method]))]
    return [(what, figure, target, figure <= target) for what, figure, target in found]


def report(result: dict) -> str:
    bare, bare_cpu, read = result["median"][BARE], result["cpu"][BARE], result["read"]
    cost, whole = costs(result), costs(result, direct=False)
    lines = [f"{result['model']}{' (quick)' if result['quick'] else ''} ({result['numel']:,} numbers "
             f"in {result['params']} parameters): bare step {bare * 1e3:.2f} ms, CPU "
             f"{bare_cpu * 1e3:.2f} ms; one read pass {read * 1e3:.3f} ms CPU",
             f"  {'method':<26} {'median step':>12} {'in hooks':>9} {'worker+writer':>14} "
             f"{'cost (CPU)':>11} {'of bare':>8} {'read passes':>12} {'end to end':>11}"]
    for method in list(result["median"])[1:]:
        lines.append(f"  {method:<26} {result['median'][method] * 1e3:9.2f} ms "
                     f"{result['hooks'][method] * 1e3:6.2f} ms "
                     f"{result['threads'].get(method, 0.0) * 1e3:11.2f} ms "
                     f"{cost[method] * 1e3:8.2f} ms {cost[method] / bare_cpu:+8.1%} "
                     f"{cost[method] / read:11.1f}× {whole[method] / bare_cpu:+10.1%}")
    for method, (every, changes, heavy, found) in result["cadence"].items():
        seen = "" if found is None else " (its estimates a step: light {:.2f} ms, heavy {:.2f} ms, " \
            "bare {:.2f} ms)".format(*(x * 1e3 for x in found))
        lines.append(f"  {method}: heavy figures every {every} step(s) at the end{seen}, {heavy} "
                     f"heavy step(s) among the counted; cadence changes [step, every]: {changes}")
    writer = result["writer"].get(WATCH_RUN, 0.0)
    lines.append(f"  of watch's threads, the run directory's writer: {writer * 1e3:.2f} ms a step "
                 f"({writer / bare_cpu:.1%} of the bare step)")
    for what, figure, target, met in targets(result):
        shown = (f"{figure:+.1%} (target ≤ +{target:.0%})" if "share" in what
                 else f"{figure:.1f} (target ≤ {target:.0f})")
        lines.append(f"  {what}: {shown} {'met' if met else 'NOT MET'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(W.STANDARD), choices=W.STANDARD)
    parser.add_argument("--quick", action="store_true", help="the slow workloads shrunk, fewer steps")
    parser.add_argument("--rounds", type=int, help="counted rounds (default 5; --quick 3)")
    parser.add_argument("--steps", type=int, help="steps of each arm a round (default: by workload)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--arms", nargs="+", choices=ARMS, help="only these arms (and the bare "
                        "loop and the floor): less memory for GPT-2 small's copies")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), SGD momentum 0.9, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}", flush=True)
    for name in args.models:
        slow = name in ("resnet18-224", "gpt2-small")
        # GPT-2 small shrunk (2×64 tokens, ~2 s a step) takes 3 steps a round: its step-to-step
        # spread under load is a few read passes, more than the median of 3 steps can hide
        steps = args.steps or (3 if name == "gpt2-small" and args.quick else 1 if slow
                               else 4 if name == "resnet18" else 40)
        rounds = args.rounds or (3 if args.quick else 5)
        arms = None if args.arms is None else [ARMS[a] for a in args.arms]
        print(report(measure(name, rounds, steps, args.quick, arms)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
