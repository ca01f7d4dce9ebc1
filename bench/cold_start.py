"""The first watched steps on a cold Numba cache (issue 26): how long each waits, who compiles.

    python bench/cold_start.py                 # in memory and with a run directory, cold then warm
    python bench/cold_start.py --steps 3000    # long enough to see the spike kernels get ready

Each measurement is a fresh process whose ``NUMBA_CACHE_DIR`` is a new empty folder (cold: every
kernel compiled), then a second process on the same folder (warm: loaded from it). The loop is
issue 26's MLP, 4x(Linear 256->256, ReLU) + Linear(256, 1), batch 64, SGD, one torch thread,
under ``gx.watch(model, opt, run_dir)``. Printed: ``watch()``'s own time, the first, second and
third step, the median of steps 4-40 and of the last half, the step at which the spike kernels
were ready (their warm-up, core/diagnose/spike_warmup.py) and the Numba compilations per
thread and kernel module (top-level calls; a cache hit is no compilation). Wall-clock times on
a shared machine: look at the first step against the steady one.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child(mode: str, steps: int) -> None:
    import numba.core.event as numba_event

    compiled: dict[tuple[str, str], list] = {}
    depth: dict[int, tuple[int, float]] = {}

    class Compiles(numba_event.Listener):
        def on_start(self, event):
            n, t0 = depth.get(threading.get_ident(), (0, time.perf_counter()))
            depth[threading.get_ident()] = (n + 1, t0)

        def on_end(self, event):
            n, t0 = depth.pop(threading.get_ident())
            if n > 1:
                depth[threading.get_ident()] = (n - 1, t0)
                return
            module = event.data["dispatcher"].py_func.__module__.rsplit(".", 1)[-1]
            entry = compiled.setdefault((threading.current_thread().name, module), [0, 0.0])
            entry[0] += 1
            entry[1] += time.perf_counter() - t0

    numba_event.register("numba:compile", Compiles())
    import torch
    from torch import nn

    import gradexplorer as gx
    from gradexplorer.core.diagnose import spike_warmup

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(256, 256), nn.ReLU())],
                          nn.Linear(256, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, 256), torch.randn(64, 1)
    run_dir = None if mode == "memory" else Path(tempfile.mkdtemp()) / "run"
    t0 = time.perf_counter()
    rec = gx.watch(model, opt, run_dir)
    opened, times, ready_at = time.perf_counter() - t0, [], None
    for step in range(1, steps + 1):
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        rec.note_loss(loss)
        loss.backward()
        opt.step()
        times.append((time.perf_counter() - t0) * 1e3)
        if ready_at is None and run_dir is not None and spike_warmup.ready() is not None:
            ready_at = step + 1
    rec.close()
    t0 = time.perf_counter()
    if rec.spikes is not None:
        rec.spikes.close()
    closing = time.perf_counter() - t0
    print(f"  watch() {opened * 1e3:.0f} ms; step 1 {times[0]:.0f} ms, 2 {times[1]:.1f} ms, "
          f"3 {times[2]:.1f} ms, 4-40 median {statistics.median(times[3:40]):.2f} ms, "
          f"last half median {statistics.median(times[steps // 2:]):.2f} ms")
    if run_dir is not None:
        during = times[1:ready_at - 1] if ready_at else times[1:]
        print(f"  spike kernels ready from step {ready_at or 'none'} "
              f"(steps before: median {statistics.median(during or [0]):.2f} ms, "
              f"max {max(during or [0]):.1f} ms); closing the spike log waited {closing:.1f} s")
    for (thread, module), (count, seconds) in sorted(compiled.items()):
        print(f"  compiled on {thread}: {module}, {count} kernel(s), {seconds:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--modes", nargs="+", default=["memory", "rundir"], choices=["memory", "rundir"])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, max(args.steps, 40))
        return
    for mode in args.modes:
        with tempfile.TemporaryDirectory() as cache:
            for state in ("cold", "warm"):
                print(f"{mode}, {state} Numba cache:", flush=True)
                env = {**os.environ, "NUMBA_CACHE_DIR": cache,
                       "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
                subprocess.run([sys.executable, __file__, "--child", mode, "--steps", str(args.steps)],
                               env=env, check=True)


if __name__ == "__main__":
    main()
