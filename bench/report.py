"""Time and size of ``gradexplorer report`` on a big run: 10,000 steps × 150 parameters.

    python bench/report.py                         # builds the run once in /tmp, then times
    python bench/report.py --steps 2000 --params 40 --run /tmp/gx-report-small

The run is written by the recorder's own ``RunWriter`` (every step's figures and a 64-bin
histogram of every parameter, a loss, two NaN/Inf events), as ``gradexplorer.watch`` writes
one; the figures are synthetic (a decaying, noisy gradient norm) so that building it takes a
minute, not days of training. The report is then made by the command line in a fresh process,
as a user runs it (``--repeat`` times; the median and every time are printed), and its size given.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gradexplorer.core.runs.writer import RunWriter  # noqa: E402
from gradexplorer.core.stats.records import Histogram, ParamStats, StepGradients  # noqa: E402


def parameter_names(count: int) -> list[tuple[str, list[int]]]:
    """GPT-2-like names: blocks of 12 parameters, then the embeddings and the final norm."""
    names = [("wte.weight", [5000, 64]), ("wpe.weight", [256, 64])]
    block = [("ln_1.weight", [64]), ("ln_1.bias", [64]), ("attn.c_attn.weight", [64, 192]),
             ("attn.c_attn.bias", [192]), ("attn.c_proj.weight", [64, 64]), ("attn.c_proj.bias", [64]),
             ("ln_2.weight", [64]), ("ln_2.bias", [64]), ("mlp.c_fc.weight", [64, 256]),
             ("mlp.c_fc.bias", [256]), ("mlp.c_proj.weight", [256, 64]), ("mlp.c_proj.bias", [64])]
    i = 0
    while len(names) < count - 2:
        names += [(f"h.{i}.{n}", s) for n, s in block][: count - 2 - len(names)]
        i += 1
    return names + [("ln_f.weight", [64]), ("ln_f.bias", [64])]


def build_run(path: Path, steps: int, params: int, bins: int = 64, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    names = parameter_names(params)
    writer = RunWriter(path)
    writer.set_meta({
        "structure": {"model": "SyntheticGPT", "parameters": [
            {"name": n, "shape": s, "numel": int(np.prod(s)), "dtype": "float32", "requires_grad": True}
            for n, s in names], "modules": []},
        "settings": {"every": 1, "bins": bins, "hooks": {"h.0.attn": "scale:0.5"}},
    })
    scale = rng.uniform(0.2, 3.0, len(names))
    centre = np.linspace(-3, 3, bins)
    bad = {(int(steps * 0.7), names[5][0]): (3, 0), (int(steps * 0.7), names[17][0]): (0, 2)}
    for step in range(1, steps + 1):
        decay = 0.05 + 1.0 / (1 + step / 500)
        shape = np.exp(-0.5 * centre**2)
        records, hists, total = {}, {}, 0.0
        for j, (name, shp) in enumerate(names):
            numel = int(np.prod(shp))
            std = float(scale[j] * decay * (1 + 0.1 * rng.standard_normal()))
            norm = std * np.sqrt(numel)
            nan, inf = bad.get((step, name), (0, 0))
            counts = np.floor(shape / shape.sum() * numel).astype(np.int64)
            counts[bins // 2] += numel - nan - inf - counts.sum()
            lo, hi = -3 * std, 3 * std
            records[name] = ParamStats(name, tuple(shp), numel, True, norm, 0.0, std, lo, hi, hi,
                                       0.0, nan, inf, 1e-3 * decay)
            hists[name] = Histogram(np.linspace(lo, hi, bins + 1), counts, nan, inf)
            total += norm**2
        record = StepGradients(step, float(np.sqrt(total)), sum(int(np.prod(s)) for _, s in names),
                               records, hists, bins, "auto", 0.01)
        writer.write_step(record, loss=float(4 * decay + 0.05 * rng.standard_normal()))
    writer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--params", type=int, default=150)
    parser.add_argument("--run", type=Path, default=None, help="run directory (built if missing)")
    parser.add_argument("--out", type=Path, default=Path("/tmp/gx-report-bench.html"))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    run = args.run or Path(f"/tmp/gx-report-run-{args.steps}x{args.params}")
    if not (run / "run.sqlite").is_file():
        t0 = time.perf_counter()
        build_run(run, args.steps, args.params)
        print(f"built {run} ({args.steps} steps x {args.params} parameters) in "
              f"{time.perf_counter() - t0:.0f} s")
    size = (run / "run.sqlite").stat().st_size
    print(f"run database: {size / 1e9:.2f} GB")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    times, cpu = [], []
    for _ in range(args.repeat):
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "gradexplorer", "report", str(run),
                               "--out", str(args.out)], env=env, capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        now = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(now.ru_utime + now.ru_stime - used.ru_utime - used.ru_stime)
        if proc.returncode:
            sys.exit(proc.stderr)
    print(proc.stdout.strip())
    print(f"report: {args.out.stat().st_size / 1e6:.2f} MB; wall time of `gradexplorer report` "
          f"(fresh process, start-up included): median {statistics.median(times):.2f} s "
          f"({', '.join(f'{t:.2f}' for t in times)}); CPU time (user + system) median "
          f"{statistics.median(cpu):.2f} s; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
