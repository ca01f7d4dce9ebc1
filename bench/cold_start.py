"""The app's start: ``python -m gradexplorer`` to its window painted and to ready to step
(issue 43 item 6).

    python bench/cold_start.py                  # 3 launches, the median
    python bench/cold_start.py --runs 5 --fresh-numba   # each launch on an empty Numba cache

Each launch is a new process on the default example with fresh settings and caches (a first
launch: the shipped graph cache), offscreen unless a display is set, after the package's
bytecode is written as installing it does. The app notes its marks (``GRADEXPLORER_STARTUP_LOG``,
gui/window/startup_clock.py): window painted, first graph drawn, live traced graph drawn, ready
to step (the session open, Step enabled: it then steps once, as a user clicking Step at once
would), that step done and the plots made (after ready: pyqtgraph's docks fill in then).
Printed: the median seconds from the launch to each, and the CPU seconds the process had used
by then, beside the targets (window <= 1 s, ready <= 3 s).
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKS = ("window", "graph", "live", "ready", "stepped", "plots")
TARGETS = {"window": 1.0, "ready": 3.0}


def compile_package() -> None:
    """Write the package's bytecode first, as installing it does (pip compiles a wheel's
    modules): else, with PYTHONDONTWRITEBYTECODE set, every launch compiles gradexplorer's
    modules from source again, time the user never pays."""
    compileall.compile_dir(str(ROOT / "gradexplorer"), quiet=1)


def launch(extra_env: dict, model: str | None = None, until: str | tuple = ("stepped", "plots"),
           timeout: float = 600) -> dict[str, tuple[float, float]]:
    """One launch of the app: ``mark -> (seconds since the launch, CPU seconds used)``, run
    until the app has noted ``until`` (a mark, or all of several; or exited), then stopped
    rather than waited for."""
    until = (until,) if isinstance(until, str) else until
    folder = Path(tempfile.mkdtemp(prefix="gradexplorer-startup-"))
    log = folder / "startup.log"
    env = {**os.environ, "GRADEXPLORER_STARTUP_LOG": str(log), "XDG_CONFIG_HOME": str(folder),
           "XDG_CACHE_HOME": str(folder / "cache"), "PYTHONPATH": str(ROOT), **extra_env}
    env.setdefault("QT_QPA_PLATFORM", "offscreen" if not os.environ.get("DISPLAY") else "xcb")
    command = [sys.executable, "-m", "gradexplorer", "gui"] + (["--model", model] if model else [])
    start = time.time()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.time() + timeout
    try:
        while process.poll() is None and time.time() < deadline:
            if log.exists() and all(f"\n{mark} " in "\n" + log.read_text() for mark in until):
                break
            time.sleep(0.05)  # polling a file another process writes: no event to wait on
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    seen = {name: rest for name, *rest in map(str.split, log.read_text().splitlines())
            } if log.exists() else {}
    return {name: (float(seen[name][0]) - start, float(seen[name][1])) for name in MARKS
            if name in seen}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--fresh-numba", action="store_true",
                        help="each launch on an empty NUMBA_CACHE_DIR (a fresh installation)")
    args = parser.parse_args()
    compile_package()
    load = os.getloadavg()[0]
    runs = []
    for _ in range(args.runs):
        extra = {"NUMBA_CACHE_DIR": tempfile.mkdtemp(prefix="numba-")} if args.fresh_numba else {}
        runs.append(launch(extra))
    print(f"python -m gradexplorer, default example, median of {args.runs} launches "
          f"({'empty' if args.fresh_numba else 'present'} Numba cache; load {load:.1f} -> "
          f"{os.getloadavg()[0]:.1f}):")
    for mark in MARKS:
        found = [run[mark] for run in runs if mark in run]
        if not found:
            print(f"  {mark:8} not reached")
            continue
        wall = statistics.median(t for t, _ in found)
        cpu = statistics.median(c for _, c in found)
        target = f"  (target: <= {TARGETS[mark]:.0f} s)" if mark in TARGETS else ""
        print(f"  {mark:8} {wall:5.2f} s  (CPU {cpu:5.2f} s){target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
