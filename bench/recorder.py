"""Cost of ``gradexplorer.watch`` on a training loop you run, as a share of the bare loop.

    python bench/recorder.py                           # CPU, one thread: MLP 256, GPT-2 tiny, ResNet-18
    python bench/recorder.py --models mlp256 --rounds 3 --steps 100 --no-distributed
    python bench/recorder.py --models mlp256 --profile # where watch's time goes (cProfile, top costs)
    python bench/recorder.py --device cuda             # where a GPU is present

Single process: every method trains its own copy of the model (same weights, same batches)
in one process, interleaved step by step (rounds), so load from other processes hits all alike.
Columns: the time inside watch's step hooks as a share of the median bare step (direct, low
noise); the median step and its ratio to the bare loop's (noisier on a shared machine); the fixed
cost, the watched median minus the bare one, by the wall clock and by the training thread's CPU
(``time.thread_time``: unmoved by other processes' load); ``writer CPU`` and ``worker CPU``: the
CPU a step costs the run directory's writer thread and the statistics worker (which copies the
gradients and computes their moments and histograms where a core is spare, during the optimizer
step and the next forward and backward: ``core/stats/backends/numba/worker.py``), thread clocks over the
counted steps; add both to the training thread's for watch's whole CPU cost. The last line: spike
detection's part (the stack's reporter, ``SpikeObserver.after_step``) per recorded step. Methods:

- bare loop: zero_grad, forward, backward, optimizer.step
- watch, in memory: ``gradexplorer.watch(model, opt)``; in memory, no worker: the same with every
  statistic on the training thread (``rec.monitor.offload = False``)
- watch, run directory: ``watch(model, opt, run_dir)``; watch every 10: ``stats_every=10``
- wandb-style hooks: what ``wandb.watch(model, log="all", log_freq=1)`` does each step, without
  its service process: a hook per parameter computing ``histc`` (64 bins), min and max of the
  gradient and reading them to the host (only where wandb is installed). TorchLens is not
  installed here; its training watch is not run.

Distributed (``--ranks 2``, gloo on 127.0.0.1, FSDP2 on the CPU): the median step of the
bare sharded loop and of the watched one, and the seconds spent reducing across ranks.
"""

from __future__ import annotations

import argparse
import copy
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import workloads as W  # noqa: E402 - bench/workloads.py: the standard workloads

import gradexplorer as gx  # noqa: E402

NO_WORKER = "in memory, no worker"  # watch with every statistic on the training thread
METHODS = ("bare loop", "watch, in memory", NO_WORKER, "watch, run directory", "watch every 10")
WANDB_STYLE = "wandb-style hooks"


def mlp(width: int = 1024, depth: int = 4) -> tuple[nn.Module, callable]:
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(width, 10))

    def batch(step):
        g = torch.Generator().manual_seed(step)
        return torch.randn(64, width, generator=g), torch.randint(0, 10, (64,), generator=g)
    return model, batch


def example(spec: str):
    workload = gx.load_workload(spec)
    return workload.model, workload.make_batch, workload.loss_fn


def build(name: str):
    if name == "mlp":
        model, batch = mlp()
        return model, batch, nn.functional.cross_entropy
    if name in W.STANDARD or name == "gpt2":
        return W.build(name)
    return example(f"example:{name}")


loss_of, to = W.loss_of, W.to  # bench/workloads.py: one batch's loss, a batch moved


def wandb_style(model: nn.Module) -> list:
    """Per-parameter gradient hooks as wandb.watch(log="all", log_freq=1) installs: a 64-bin
    histc, min and max of each gradient, read to the host each step."""
    kept = []

    def hook(grad):
        g = grad.detach().float()
        kept.append((g.histc(64).tolist(), g.min().item(), g.max().item()))
    return [p.register_hook(hook) for p in model.parameters() if p.requires_grad]


class Inside:
    """Seconds spent inside every Recorder's step hooks, by recorder, and inside spike
    detection (the stack's SpikeObserver.after_step), by reporter."""

    def __init__(self) -> None:
        from gradexplorer.core.diagnose.spike_observer import SpikeObserver

        self.seconds: dict[int, float] = {}
        self.timed = [(gx.Recorder, "before_optimizer_step"), (gx.Recorder, "after_optimizer_step"),
                      (SpikeObserver, "after_step")]
        for owner, hook in self.timed:
            setattr(owner, hook, self._timed(getattr(owner, hook)))

    def _timed(self, method):
        def timed(rec, *args, **kwargs):
            start = time.perf_counter()
            try:
                return method(rec, *args, **kwargs)
            finally:
                self.seconds[id(rec)] = self.seconds.get(id(rec), 0.0) + time.perf_counter() - start
        timed.original = method
        return timed

    def close(self) -> None:
        for owner, hook in self.timed:
            setattr(owner, hook, getattr(owner, hook).original)


def writer_cpu(rec) -> float:
    """CPU seconds ``rec``'s run directory writer thread has used (writes flushed), 0 without."""
    writes = getattr(getattr(rec, "writer", None), "_writes", None)
    if writes is None or writes._thread.ident is None or not writes._thread.is_alive():
        return 0.0
    writes.flush()
    return time.clock_gettime(time.pthread_getcpuclockid(writes._thread.ident))


def worker_cpu(rec) -> float:
    """CPU seconds the statistics worker thread has spent on ``rec``'s steps, 0 without."""
    return 0.0 if rec is None else rec.monitor.worker_seconds


def measure(name: str, rounds: int = 5, steps: int = 4, device: str = "cpu") -> dict:
    """Median step seconds (wall clock, and the training thread's CPU) of every method on
    model ``name``, and seconds inside watch."""
    model, batch, loss_fn = build(name)
    inside = Inside()
    folder = tempfile.mkdtemp(prefix="gradexplorer-bench-")
    setups = {}
    hooks = []
    try:
        import wandb  # noqa: F401 - only where installed
        methods = (*METHODS, WANDB_STYLE)
    except ImportError:
        methods = METHODS
    for method in methods:
        m = copy.deepcopy(model).to(device)
        opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
        rec = None
        if method in ("watch, in memory", NO_WORKER):
            rec = gx.watch(m, opt)
            rec.monitor.offload = method != NO_WORKER
        elif method == "watch, run directory":
            rec = gx.watch(m, opt, os.path.join(folder, "run"))
        elif method == "watch every 10":
            rec = gx.watch(m, opt, os.path.join(folder, "run10"), stats_every=10)
        elif method == WANDB_STYLE:
            hooks += wandb_style(m)
        setups[method] = (m, opt, rec)
    times, cpu = ({method: [] for method in methods} for _ in range(2))
    step = 0
    warm, writer_warm, worker_warm = {}, {}, {}
    for round_ in range(rounds + 1):  # the first round warms up (kernels, caches) and is dropped
        if round_ == 1:
            warm = dict(inside.seconds)
            writer_warm = {method: writer_cpu(rec) for method, (_, _, rec) in setups.items()}
            worker_warm = {method: worker_cpu(rec) for method, (_, _, rec) in setups.items()}
        for _ in range(steps):
            for method, (m, opt, _) in setups.items():
                inputs, target = to(batch(step), device)
                start, start_cpu = time.perf_counter(), time.thread_time()
                opt.zero_grad()
                loss_of(m, inputs, target, loss_fn).backward()
                opt.step()
                if device != "cpu":
                    torch.cuda.synchronize()
                times[method].append(time.perf_counter() - start)
                cpu[method].append(time.thread_time() - start_cpu)
            step += 1
    counted = rounds * steps
    spent = {method: (inside.seconds.get(id(rec), 0.0) - warm.get(id(rec), 0.0)) / counted
             for method, (_, _, rec) in setups.items() if rec is not None}
    writer, worker = ({method: (clock(rec) - warmed[method]) / counted
                       for method, (_, _, rec) in setups.items()}
                      for clock, warmed in ((writer_cpu, writer_warm), (worker_cpu, worker_warm)))
    log = setups["watch, run directory"][2].spikes
    spikes = (inside.seconds.get(id(log), 0.0) - warm.get(id(log), 0.0)) / counted
    inside.close()
    for handle in hooks:
        handle.remove()
    for _, _, rec in setups.values():
        if rec is not None:
            rec.close()
    numel = sum(p.numel() for p in model.parameters())
    medians = {method: statistics.median(t[steps:]) for method, t in times.items()}
    return {"model": name, "numel": numel, "params": len(list(model.parameters())),
            "median": medians, "inside": spent, "device": device, "spikes": spikes, "writer": writer,
            "cpu": {method: statistics.median(t[steps:]) for method, t in cpu.items()},
            "worker": worker}


def report(result: dict) -> str:
    bare = result["median"]["bare loop"]
    lines = [f"{result['model']} ({result['numel']:,} numbers in {result['params']} parameters, "
             f"{result['device']}): bare step {bare * 1e3:.2f} ms"]
    bare_cpu = result["cpu"]["bare loop"]
    lines.append(f"  {'method':<22} {'inside watch':>14} {'median step':>13} {'vs bare':>8} "
                 f"{'fixed cost':>11} {'thread CPU':>11} {'fixed (CPU)':>12} {'worker CPU':>11} "
                 f"{'writer CPU':>11}")
    for method, seconds in result["median"].items():
        spent = result["inside"].get(method)
        share = "" if spent is None else f"{spent / bare:.1%}"
        c = result["cpu"][method]
        lines.append(f"  {method:<22} {share:>14} {seconds * 1e3:10.2f} ms {seconds / bare - 1:+8.1%} "
                     f"{(seconds - bare) * 1e3:8.2f} ms {c * 1e3:8.2f} ms {(c - bare_cpu) * 1e3:9.2f} ms"
                     f" {result['worker'][method] * 1e3:8.2f} ms {result['writer'][method] * 1e3:8.2f} ms")
    lines.append(f"  spike detection (part of the run directory's): {result['spikes'] * 1e6:.0f} us "
                 f"a step, {result['spikes'] / bare:.2%} of the bare step")
    return "\n".join(lines)


# -- distributed ------------------------------------------------------------------------------
def _rank(rank: int, world: int, port: int, steps: int, out: str) -> None:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    from gradexplorer.core.watch import sharded

    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (world,))
    spent = [0.0]
    original = sharded.ShardedMeasure._reduce  # the two collectives and the combining

    def timed(self, *args):
        start = time.perf_counter()
        try:
            return original(self, *args)
        finally:
            spent[0] += time.perf_counter() - start
    sharded.ShardedMeasure._reduce = timed
    results = {}
    for watched in (False, True, False, True):
        model, batch = mlp(512, 4)
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        rec = gx.watch(model, opt, os.path.join(out, "run") if watched else None) if watched else None
        spent[0] = 0.0
        times = []
        for step in range(steps):
            x, y = batch(step)
            x, y = x[rank::world], y[rank::world]
            dist.barrier()
            start = time.perf_counter()
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            times.append(time.perf_counter() - start)
        if rec is not None:
            rec.close()
        results.setdefault(watched, []).extend(times[2:])
        if watched:
            results.setdefault("collectives", []).append(spent[0] / steps)
    if rank == 0:
        bare, watched = statistics.median(results[False]), statistics.median(results[True])
        per_step = statistics.median(results["collectives"])
        print(f"FSDP2, 2 gloo ranks, MLP 512x4 (1.05M numbers): bare step {bare * 1e3:.2f} ms, "
              f"watched {watched * 1e3:.2f} ms ({watched / bare - 1:+.1%}); "
              f"reduction (2 collectives, combining, shard histograms) {per_step * 1e3:.2f} ms a step")
    dist.destroy_process_group()


def distributed(steps: int = 12) -> None:
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_rank, args=(2, port, steps, tempfile.mkdtemp(prefix="gradexplorer-bench-")),
             nprocs=2, join=True)


def _profiled(name: str, steps: int, watched: bool, run_dir: bool):
    """cProfile stats of ``steps`` steps (after 30 warm-up steps) of the bare or watched loop."""
    import cProfile
    import pstats

    model, batch, loss_fn = build(name)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    rec = gx.watch(model, opt, os.path.join(tempfile.mkdtemp(), "run") if run_dir else None) \
        if watched else None

    def step(i):
        inputs, target = batch(i)
        opt.zero_grad()
        loss_of(model, inputs, target, loss_fn).backward()
        opt.step()
    for i in range(30):
        step(i)
    prof = cProfile.Profile()
    prof.enable()
    for i in range(steps):
        step(i)
    prof.disable()
    rec is None or rec.close()
    return pstats.Stats(prof)


def profile(name: str, steps: int = 300, run_dir: bool = True, top: int = 25) -> None:
    """cProfile of ``steps`` steps of ``watch(model, opt, run_dir)`` (after 30 warm-up steps):
    the Python calls a step (watched, bare, and watch's own: the difference; call counts do
    not depend on the machine's load) and the top costs by own time."""
    bare = _profiled(name, steps, False, run_dir).total_calls / steps
    stats = _profiled(name, steps, True, run_dir)
    watched = stats.total_calls / steps
    print(f"{name}: {watched:.0f} Python calls a step watched "
          f"({'with' if run_dir else 'without'} run directory), {bare:.0f} bare: "
          f"watch's own {watched - bare:.0f} a step")
    stats.sort_stats("tottime").print_stats(top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["mlp256", "gpt2", "resnet18"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20, help="steps of each method per round")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--profile", action="store_true", help="cProfile of watch on the first model")
    parser.add_argument("--in-memory", action="store_true", help="--profile without a run directory")
    parser.add_argument("--no-distributed", action="store_true")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    if args.profile:
        profile(args.models[0], run_dir=not args.in_memory)
        return
    for name in args.models:
        print(report(measure(name, args.rounds, args.steps, device=args.device)))
    if not args.no_distributed:
        distributed()


if __name__ == "__main__":
    main()
