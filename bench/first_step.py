"""The first watched step in a fresh environment and in a later process (issue 42 item 3).

    python bench/first_step.py                 # in memory and with a run directory, cold then warm
    python bench/first_step.py --steps 400     # long enough to see the Numba kernels take over

Each measurement is a fresh process whose ``NUMBA_CACHE_DIR`` is a new empty folder (cold: a
fresh environment, every kernel to compile), then a second process on the same folder (warm:
loaded from it). The loop is issue 26's MLP, 4x(Linear 256->256, ReLU) + Linear(256, 1), batch
64, SGD, one torch thread, under ``gx.watch(model, opt, run_dir)``. Printed: the first step's
cost above step 10's in the training thread's CPU time, the process's CPU time (every thread:
the kernels' warm-up included) and wall time, beside the target (<= 0.2 s more than a later
step); the step from which the Numba kernels measure (the torch backend before:
core/stats/backends/warmup.py) and the seconds until then; the median step before and after; the
Numba compilations per thread and kernel module (top-level calls; a cache hit is none). The
process then waits for the warm-up (a helper process compiles a cold cache), so the warm
process finds the cache filled.
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
TARGET_S = 0.2


def listen_for_compilations() -> dict:
    """``(thread, kernel module) -> [count, seconds]`` of Numba's top-level compilations."""
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
    return compiled


def child(mode: str, steps: int) -> None:
    compiled = listen_for_compilations()  # (imports Numba here, before the clock starts)
    import torch
    from torch import nn

    import gradexplorer as gx
    from gradexplorer.core.stats.backends import warmup as stats_warmup

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(256, 256), nn.ReLU())],
                          nn.Linear(256, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, 256), torch.randn(64, 1)
    run_dir = None if mode == "memory" else Path(tempfile.mkdtemp()) / "run"
    rec = gx.watch(model, opt, run_dir)
    cpu, thread, wall, backends = [], [], [], []
    for _ in range(steps):
        c0, t0, w0 = time.process_time(), time.thread_time(), time.perf_counter()
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        rec.note_loss(loss)
        loss.backward()
        opt.step()
        cpu.append(time.process_time() - c0)
        thread.append(time.thread_time() - t0)
        wall.append(time.perf_counter() - w0)
        backends.append(rec.monitor.backend)
    took_over = backends.index("numba") if "numba" in backends else None
    rec.close()
    waited = time.perf_counter()
    stats_warmup.wait()  # not the loop: the bench, so the warm process finds a filled cache
    waited = time.perf_counter() - waited
    print(f"  first step minus step 10: thread CPU {(thread[0] - thread[9]) * 1e3:.0f} ms, "
          f"process CPU {(cpu[0] - cpu[9]) * 1e3:.0f} ms, wall {(wall[0] - wall[9]) * 1e3:.0f} ms "
          f"(target: <= {TARGET_S * 1e3:.0f} ms more); step 1 {wall[0] * 1e3:.0f} ms wall, "
          f"step 10 {wall[9] * 1e3:.1f} ms")
    if took_over is None:
        print(f"  Numba's kernels not loaded within {steps} steps (the torch backend measured "
              f"them all: median {statistics.median(thread) * 1e3:.2f} ms thread CPU); "
              f"the warm-up ended {waited:.1f} s after the loop")
    else:
        print(f"  Numba's kernels measure from step {took_over + 1}, "
              f"{sum(wall[:took_over]):.1f} s after watch(); median step before "
              f"{statistics.median(thread[1:took_over] or [0]) * 1e3:.2f} ms thread CPU, after "
              f"{statistics.median(thread[took_over:]) * 1e3:.2f} ms")
    for (name, module), (count, seconds) in sorted(compiled.items()):
        print(f"  compiled on {name}: {module}, {count} kernel(s), {seconds:.1f} s")
    if not compiled:
        print("  nothing compiled in this process")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--modes", nargs="+", default=["memory", "rundir"], choices=["memory", "rundir"])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, max(args.steps, 10))
        return
    print(f"load average {os.getloadavg()[0]:.1f}")
    for mode in args.modes:
        with tempfile.TemporaryDirectory() as cache:
            for state in ("cold (a fresh environment)", "warm (a later process)"):
                print(f"{mode}, {state}:", flush=True)
                env = {**os.environ, "NUMBA_CACHE_DIR": cache,
                       "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
                env.pop("GRADEXPLORER_KERNELS", None)
                subprocess.run([sys.executable, __file__, "--child", mode, "--steps", str(args.steps)],
                               env=env, check=True)


if __name__ == "__main__":
    main()
