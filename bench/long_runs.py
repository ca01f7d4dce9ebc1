"""Reading long runs: step figures, the report and the exports of 20,000- and 100,000-step runs.

    python bench/long_runs.py                 # runs built once under /tmp/gx-long-runs
    python bench/long_runs.py --big 0         # without the 100,000-step run

The runs are written fast (``long_run_synth.py``: the recorder's writer for the first 100
steps, SQL copies for the rest; 20 parameters, 64-bin histograms every 10th step, a
skipped, a clipped and a NaN step every 100). Printed beside each target, all CPU time
(user + system) on this machine: ``RunHistory.step_figures()`` of 20,000 steps (in process,
best of 3); ``gradexplorer report`` of a 200- and a 20,000-step run (fresh processes, start-up
included, median of 3); ``export --to tensorboard`` per histogram (a 2,000-step run with
histograms at every step, in process, best of 3); and the CSV export and report of the
100,000-step run (fresh processes, once) with their progress lines.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from long_run_synth import synth_run  # noqa: E402


def command_cpu(*args: str) -> tuple[float, float, str]:
    """``gradexplorer ARGS`` in a fresh process: (CPU seconds, wall seconds, stderr)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "gradexplorer", *args], env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    now = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        sys.exit(proc.stderr)
    return now.ru_utime + now.ru_stime - used.ru_utime - used.ru_stime, wall, proc.stderr


def best_cpu(work, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.process_time()
        work()
        times.append(time.process_time() - start)
    return min(times)


def line(what: str, figure: str, target: str, met: bool) -> None:
    print(f"{what:<58} {figure:>16}   target {target:<22} {'met' if met else 'NOT MET'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/gx-long-runs"))
    parser.add_argument("--big", type=int, default=100_000, help="steps of the big run (0: none)")
    args = parser.parse_args()
    import gradexplorer as gx
    from gradexplorer.core.runs.history import RunHistory
    from gradexplorer.core.share.selection import select
    from gradexplorer.core.share.tensorboard_events import export_tensorboard

    start = time.perf_counter()
    small = synth_run(args.dir / "steps-200", 200)
    long = synth_run(args.dir / "steps-20000", 20_000)
    every = synth_run(args.dir / "hist-every-step-2000", 2_000, hist_every=1)
    big = synth_run(args.dir / f"steps-{args.big}", args.big, hist_every=50) if args.big else None
    print(f"runs ready in {time.perf_counter() - start:.1f} s (20 parameters, 64 bins); "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n")

    with gx.open_run(long) as run:
        history = RunHistory(run)
        cpu = best_cpu(history.step_figures)
    line("step_figures() of 20,000 steps (CPU, best of 3)", f"{cpu:.3f} s", "<= 0.1 s", cpu <= 0.1)

    out = args.dir / "report.html"
    reports = {}
    for name, path in (("200", small), ("20,000", long)):
        cpus = [command_cpu("report", str(path), "--out", str(out), "--overwrite")[0] for _ in range(3)]
        reports[name] = statistics.median(cpus)
    line("`gradexplorer report`, 200 steps (CPU, median of 3)", f"{reports['200']:.2f} s", "-", True)
    ratio = reports["20,000"] / reports["200"]
    line("`gradexplorer report`, 20,000 steps (CPU, median of 3)", f"{reports['20,000']:.2f} s",
         "<= 1 s", reports["20,000"] <= 1.0)
    line("  ... as a multiple of the 200-step report", f"{ratio:.2f}x", "<= 3x", ratio <= 3)

    with gx.open_run(every) as run:
        history = RunHistory(run)
        selection = select(run)
        histograms = run._rows("SELECT COUNT(*) FROM histograms")[0][0]
        folder = args.dir / "tensorboard"

        def export() -> None:
            shutil.rmtree(folder, ignore_errors=True)
            export_tensorboard(history, selection, folder)

        cpu = best_cpu(export)
    per = cpu / histograms * 1e6
    line(f"TensorBoard export per histogram ({histograms:,}, with scalars)", f"{per:.1f} us",
         "<= 20 us", per <= 20)

    if big is not None:
        runs = {"report": ["report", str(big), "--out", str(out), "--overwrite"],
                "export --to csv --params 'layers.0.*'": [
                    "export", str(big), "--to", "csv", str(args.dir / "big.csv"), "--overwrite",
                    "--params", "layers.0.*"]}
        for what, argv in runs.items():
            cpu, wall, err = command_cpu(*argv)
            progress = [text for text in err.splitlines() if text.startswith(f"{argv[0]}:")]
            line(f"`{what}`, {args.big:,} steps (CPU; wall {wall:.0f} s)", f"{cpu:.1f} s",
                 "bounded, progress", bool(progress) or wall < 5)
            print(f"    {len(progress)} progress line(s) on stderr{': ' + progress[-1] if progress else ''}")


if __name__ == "__main__":
    main()
