"""``gradexplorer open SNAPSHOT``: browse a gradient snapshot (no model needed)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gradexplorer.commands.gui import prepare_window


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("open", help="browse a gradient snapshot in the app (no model needed)")
    parser.add_argument("snapshot", type=Path, help="snapshot folder (step-NNNNNN) or a run's folder")
    parser.add_argument("--compare", type=Path, metavar="OTHER",
                        help="compare with another snapshot, side by side")
    parser.add_argument("--screenshot", type=Path, metavar="FILE.png",
                        help="save a picture of the window and exit")
    parser.set_defaults(func=open_command)


def open_command(args: argparse.Namespace) -> int:
    from gradexplorer.core.snapshot import read_snapshot

    read_snapshot(args.snapshot)  # refuse a missing or damaged folder before any window opens
    if args.compare is not None:
        read_snapshot(args.compare)
    prepare_window(args.screenshot)
    from gradexplorer.gui.app import open_snapshot_window  # Qt only now

    return open_snapshot_window(args.snapshot, args.compare, args.screenshot)
