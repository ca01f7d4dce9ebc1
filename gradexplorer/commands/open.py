"""``gradexplorer open PATH``: browse a gradient snapshot, or follow a run directory live (no
model needed)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gradexplorer.commands.gui import prepare_window


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("open", help="browse a gradient snapshot, or follow a run written by "
                                         "gradexplorer.watch, in the app (no model needed)")
    parser.add_argument("snapshot", type=Path, metavar="PATH",
                        help="snapshot folder (step-NNNNNN), a folder of snapshots, or a run directory")
    parser.add_argument("--compare", type=Path, metavar="OTHER",
                        help="compare with another snapshot, side by side")
    parser.add_argument("--screenshot", type=Path, metavar="FILE.png",
                        help="save a picture of the window and exit")
    parser.set_defaults(func=open_command)


def open_command(args: argparse.Namespace) -> int:
    from gradexplorer.core.recorder.schema import is_run_dir
    from gradexplorer.core.snapshot import read_snapshot

    if is_run_dir(args.snapshot) or not_written_yet(args.snapshot):
        return open_run(args)
    read_snapshot(args.snapshot)  # refuse a missing or damaged folder before any window opens
    if args.compare is not None:
        read_snapshot(args.compare)
    prepare_window(args.screenshot)
    from gradexplorer.gui.app import open_snapshot_window  # Qt only now

    return open_snapshot_window(args.snapshot, args.compare, args.screenshot)


def not_written_yet(path: Path) -> bool:
    """A folder that does not exist yet: a run whose writer has not started (the app waits
    for it, as TensorBoard waits on an empty log folder). An existing folder that is neither a
    run nor a snapshot is refused, as before."""
    return not path.exists()


def open_run(args: argparse.Namespace) -> int:
    from gradexplorer.core.errors import UserError
    from gradexplorer.core.recorder.run import open_run as read_run

    if args.compare is not None:
        raise UserError("--compare is for snapshots; compare runs with: gradexplorer compare A B")
    if not not_written_yet(args.snapshot):
        with read_run(args.snapshot) as run:
            run.check()  # refuse a damaged run before any window opens
    prepare_window(args.screenshot)
    from gradexplorer.gui.app import open_run_window  # Qt only now

    return open_run_window(args.snapshot, args.screenshot)
