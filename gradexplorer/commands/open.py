"""``gradexplorer open PATH``: browse a gradient snapshot, or follow a run directory live (no
model needed)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gradexplorer.commands.flag_values import real_number, whole_number
from gradexplorer.commands.gui import add_overwrite_argument, app_module, prepare_window, window_size
from gradexplorer.commands.overlay_options import add_overlay_arguments, check_overlay


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("open", help="browse a gradient snapshot, or follow a run written by "
                                         "gradexplorer.watch, in the app (no model needed)")
    parser.add_argument("snapshot", type=Path, metavar="PATH",
                        help="snapshot folder (step-NNNNNN), a folder of snapshots, or a run directory")
    parser.add_argument("more", type=Path, nargs="*", metavar="RUN",
                        help="more run directories overlaid on the first in their colours (curves, "
                             "bands, the selected parameter's figures), e.g. open RUN1 RUN2 RUN3")
    parser.add_argument("--compare", type=Path, metavar="OTHER",
                        help="compare with another snapshot, side by side")
    parser.add_argument("--screenshot", type=Path, metavar="FILE.png",
                        help="save a picture of the window and exit")
    add_overwrite_argument(parser)
    parser.add_argument("--window-size", metavar="WxH", type=window_size,
                        help="open the window at this size in pixels, e.g. 1024x700 (screenshots)")
    parser.add_argument("--spike", type=whole_number(0), metavar="STEP",
                        help="run directory: open the spike event that begins at STEP (its onset "
                             "ranking, the graph tinted by onset), as clicking its marker does")
    parser.add_argument("--diverge", type=Path, metavar="OTHER",
                        help="run directory: show where run OTHER parts from it (first step "
                             "and parameters ranked by gap), as File → Compare runs does")
    parser.add_argument("--tol", type=real_number(0), default=None,
                        help="with --diverge: relative tolerance (default as gradexplorer diverge)")
    parser.add_argument("--dock", choices=("curves", "events", "ledger", "optimizer", "spikes",
                                           "distributions"),
                        help="run directory: bring this tab to the front (distributions: the "
                             "tiles and bands beside the heat map)")
    add_overlay_arguments(parser)
    parser.set_defaults(func=open_command)


def open_command(args: argparse.Namespace) -> int:
    from gradexplorer.core.messages.errors import UserError
    from gradexplorer.core.runs.schema import is_run_dir
    from gradexplorer.core.snapshot import read_snapshot

    if is_run_dir(args.snapshot) or not_written_yet(args.snapshot):
        return open_run(args)
    if args.more:
        raise UserError(f"{str(args.snapshot)!r} is not a run directory: only runs are overlaid "
                        "(compare two snapshots with --compare)")
    read_snapshot(args.snapshot)  # refuse a missing or damaged folder before any window opens
    if args.compare is not None:
        read_snapshot(args.compare)
    prepare_window(args.screenshot, args.overwrite)
    return app_module().open_snapshot_window(args.snapshot, args.compare, args.screenshot)


def not_written_yet(path: Path) -> bool:
    """A folder that does not exist yet: a run whose writer has not started (the app waits
    for it, as TensorBoard waits on an empty log folder). An existing folder that is neither a
    run nor a snapshot is refused, as before."""
    return not path.exists()


def check_run(args: argparse.Namespace, read_run) -> None:
    """Refuse a damaged run, or a --spike step it has no event at, before any window opens."""
    from gradexplorer.core.messages.errors import UserError

    with read_run(args.snapshot) as run:
        run.check()
        if args.spike is not None and args.spike not in {e.step for e in run.spike_events()}:
            steps = ", ".join(str(e.step) for e in run.spike_events()) or "none"
            raise UserError(f"--spike {args.spike}: run {str(args.snapshot)!r} has no spike event "
                            f"beginning at that step (events at: {steps})")


def open_run(args: argparse.Namespace) -> int:
    from gradexplorer.core.messages.errors import UserError
    from gradexplorer.core.runs.run import open_run as read_run

    if args.compare is not None:
        raise UserError("--compare is for snapshots; compare runs with: gradexplorer compare A B "
                        "or open A --diverge B")
    if not_written_yet(args.snapshot):  # waited for in the window; nothing to check yet
        if args.spike is not None or args.diverge is not None:
            raise UserError(f"{str(args.snapshot)!r} does not exist yet: --spike and --diverge "
                            "need a written run")
    else:
        check_run(args, read_run)
    check_overlay(args, read_run)
    if args.diverge is not None:
        from gradexplorer.core.runs.divergence import find_divergence

        find_divergence(args.snapshot, args.diverge, 0.0 if args.tol is None else args.tol)
    prepare_window(args.screenshot, args.overwrite)
    open_run_window = app_module().open_run_window  # Qt only now
    from gradexplorer.gui.runs.run_compare import overlay_opener
    from gradexplorer.gui.window.step_forensics import run_opener

    show = overlay_opener(run_opener(args.spike, args.diverge, args.tol, args.dock), args.more,
                          args.x_axis, args.heatmap_axis, args.select, args.reference)
    return open_run_window(args.snapshot, args.screenshot, args.window_size, show, theme=args.theme)
