"""Benchmark: how long File → Open run takes on a run of many small parameters (issue 22.12).

    python bench/open_run.py [--params 5000] [--steps 30] [--bins 16] [--runs 3] [--run-dir DIR]
                             [--against 10] [--against-dir DIR]

Writes (once, kept in ``--run-dir``) a run recorded by ``gx.watch`` of a model with
``--params`` small parameters, then times ``show_run`` in the main window: from the call to
every view filled and drawn (median of ``--runs``). Offscreen unless a display is set.

With ``--against N`` (default 10; 0: none) a run of N parameters is opened in turn with it, in
the same window (the machine's load the same for both), and each figure's ratio is printed
beside issue 43's target: the big run opens within 4x the small one.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def many_parameter_model(params: int):
    """A model of ``params`` parameters of 4 values each, every one on the loss's path."""
    import torch
    from torch import nn

    class ManySmall(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.ModuleList(nn.Linear(2, 1) for _ in range(params // 2))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.stack([block(x) for block in self.blocks]).mean(0)

    return ManySmall()


def write_run(run_dir: Path, params: int, steps: int, bins: int = 64) -> Path:
    """A finished run of ``steps`` steps of the many-parameter model at ``run_dir``."""
    import torch

    import gradexplorer as gx

    torch.manual_seed(0)
    model = many_parameter_model(params)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gx.watch(model, opt, run_dir, bins=bins, overwrite=True) as rec:
        for _ in range(steps):
            x = torch.randn(8, 2)
            loss = model(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            rec.note_loss(loss)
            opt.step()
    return run_dir


TARGET = 4.0  # issue 43: the 5,000-parameter run opens within 4x a 10-parameter one


def time_open(run_dir: Path, runs: int, profile: str | None = None, against: Path | None = None):
    """``(to figures, to graph, GUI CPU)``: per run, the seconds from ``show_run`` on ``run_dir``
    to every view filled and painted, to its backward graph laid out and painted too, and the
    GUI thread's CPU seconds to the figures (wall time on a shared machine is mostly waiting).
    With ``against``, ``{run_dir: those, against: those}``, the two opened in turn."""
    from gradexplorer.gui.app import application, build_window
    from gradexplorer.gui.runs.run_view import close_run, show_run
    from gradexplorer.gui.settings import AppSettings

    app = application()
    from PySide6.QtCore import QSettings

    settings = AppSettings(QSettings(str(Path(tempfile.mkdtemp()) / "bench.ini"), QSettings.IniFormat))
    window = build_window(settings=settings)
    window.show()
    app.processEvents()
    dirs = [run_dir] if against is None else [against, run_dir]
    figures = {path: ([], [], []) for path in dirs}
    for index, run_dir in ((i, path) for i in range(runs) for path in dirs):
        times, graph_times, cpu_times = figures[run_dir]
        profiler = None
        if profile and index == runs - 1 and run_dir == dirs[-1]:
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
        start, cpu = time.perf_counter(), time.thread_time()
        follower = show_run(window, run_dir)  # fills and paints every view, then returns
        window.repaint()  # (the graph is built after the figures, from the event loop)
        times.append(time.perf_counter() - start)
        cpu_times.append(time.thread_time() - cpu)  # the GUI thread's own CPU: steadier under load
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(profile)
        assert follower is not None, "the run did not open"
        while window.graph_panel.drawing is None or window.busy():  # the graph, laid out
            app.processEvents()
            time.sleep(0.005)
        window.repaint()
        graph_times.append(time.perf_counter() - start)
        close_run(window)
    window.close()
    app.processEvents()
    return figures if against is not None else figures[dirs[0]]


def main() -> None:
    from gradexplorer.core.runs.schema import database_path

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=int, default=5000)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--bins", type=int, default=16, help="histogram bins the run records")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--run-dir", type=Path, default=None,
                        help="where the run is (written there when it does not exist)")
    parser.add_argument("--profile", default=None, help="cProfile the last open into this file")
    parser.add_argument("--against", type=int, default=10,
                        help="parameters of the run opened in turn to compare with (0: none)")
    parser.add_argument("--against-dir", type=Path, default=None,
                        help="where that run is (written there when it does not exist)")
    args = parser.parse_args()

    def ready(params: int, path: Path | None) -> Path:
        path = path or Path(tempfile.gettempdir()) / f"gx-open-run-{params}p{args.steps}s{args.bins}b"
        if not database_path(path).is_file():
            began = time.perf_counter()
            write_run(path, params, args.steps, args.bins)
            print(f"wrote {path} in {time.perf_counter() - began:.1f} s")
        return path

    run_dir = ready(args.params, args.run_dir)
    against = ready(args.against, args.against_dir) if args.against else None
    found = time_open(run_dir, args.runs, args.profile, against)
    found = found if against is not None else {run_dir: found}
    medians = {}
    for path, params in ((against, args.against), (run_dir, args.params)):
        if path is None:
            continue
        for what, seconds in zip(("figures shown", "graph drawn", "GUI thread CPU to the figures"),
                                 found[path], strict=True):
            medians[path, what] = statistics.median(seconds)
            print(f"open run ({params} parameters, {args.steps} steps), {what}: median "
                  f"{medians[path, what]:.2f} s over {len(seconds)} "
                  f"({', '.join(f'{t:.2f}' for t in seconds)})")
    if against is not None:
        for what in ("graph drawn", "GUI thread CPU to the figures", "figures shown"):
            ratio = medians[run_dir, what] / max(medians[against, what], 1e-9)
            print(f"{args.params} / {args.against} parameters, {what}: {ratio:.2f}x "
                  f"(target <= {TARGET:g}x: {'met' if ratio <= TARGET else 'NOT met'})")


if __name__ == "__main__":
    main()
