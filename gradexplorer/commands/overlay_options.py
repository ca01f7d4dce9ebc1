"""``gradexplorer open RUN1 RUN2 …`` options: runs overlaid, the curves' x axis, the heat map's
value axis, a parameter selected and the reference run (scripted screenshots too)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gradexplorer.commands.flag_values import whole_number
from gradexplorer.core.messages.errors import UserError

X_AXES = {"step": "step", "relative": "relative time", "wall": "wall time"}
HEATMAP_AXES = {"fixed": "fixed", "per-step": "per step", "log": "log |g|"}


def add_overlay_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--x-axis", choices=tuple(X_AXES), default=None,
                        help="x axis of the curves and bands: step (default), relative (seconds "
                             "since each run's first step) or wall (clock time)")
    parser.add_argument("--heatmap-axis", choices=tuple(HEATMAP_AXES), default=None,
                        help="value axis of the histogram over steps: fixed (default), per-step "
                             "(each step on its own range) or log (log10 |g|)")
    parser.add_argument("--select", metavar="NAME",
                        help="run directory: parameter to select at start, e.g. h.0.attn.c_attn.weight")
    parser.add_argument("--reference", type=whole_number(1), default=None, metavar="N",
                        help="with several runs: the reference run, 1 for the first (drawn in full, "
                             "its heat map shown)")
    parser.add_argument("--theme", choices=("system", "light", "dark"),
                        help="colours: follow the system (the default), light or dark")


def check_overlay(args: argparse.Namespace, read_run) -> None:
    """Refuse, before any window opens, an added run that is not a readable run directory, a
    --select no run has, or a --reference out of range."""
    from gradexplorer.core.runs.schema import is_run_dir

    names: set[str] = set()
    for path in [args.snapshot, *args.more]:
        if path != args.snapshot and not is_run_dir(path):
            raise UserError(f"{str(path)!r} is not a run directory (no run.sqlite): only runs "
                            "written by gradexplorer.watch are overlaid")
        if is_run_dir(path):
            with read_run(path) as run:
                run.check()
                names.update(run.parameters)
    if args.select is not None and names and args.select not in names:
        raise UserError(f"--select {args.select!r}: no such parameter in the runs "
                        f"(e.g. {', '.join(sorted(names)[:3])})")
    if args.reference is not None and not 1 <= args.reference <= 1 + len(args.more):
        raise UserError(f"--reference {args.reference}: give 1 to {1 + len(args.more)} "
                        f"(the runs in the order named)")
    args.x_axis = X_AXES.get(args.x_axis) if args.x_axis else None
    args.heatmap_axis = HEATMAP_AXES.get(args.heatmap_axis) if args.heatmap_axis else None


def add_live_overlay_arguments(parser: argparse.ArgumentParser) -> None:
    """``gradexplorer gui --overlay RUN …``: runs overlaid on the live session."""
    parser.add_argument("--overlay", type=Path, action="append", default=[], metavar="RUN",
                        help="overlay this run directory on the live session (repeat for more)")
    parser.add_argument("--x-axis", choices=tuple(X_AXES), default=None,
                        help="x axis of the curves and bands: step (default), relative or wall")


def check_live_overlay(args: argparse.Namespace) -> None:
    """Refuse an --overlay that is not a readable run directory before any window opens."""
    for path in args.overlay:
        from gradexplorer.core.runs.run import open_run  # (torch: only with --overlay)
        from gradexplorer.core.runs.schema import is_run_dir

        if not is_run_dir(path):
            raise UserError(f"--overlay {str(path)!r}: not a run directory (no run.sqlite)")
        with open_run(path) as run:
            run.check()
    args.x_axis = X_AXES.get(args.x_axis) if args.x_axis else None
