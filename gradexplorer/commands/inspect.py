"""``gradexplorer inspect SNAPSHOT``: a readable table of one gradient snapshot."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gradexplorer.commands.flag_values import whole_number
from gradexplorer.commands.table_text import number, table
from gradexplorer.core.graph.style import format_shape
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.runs.schema import is_run_dir

if TYPE_CHECKING:
    from gradexplorer.core.snapshot import Snapshot


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("inspect", help="print the gradients of a snapshot or a run as a table")
    parser.add_argument("snapshot", metavar="PATH",
                        help="a snapshot directory (DIR/step-NNNNNN) or a run directory")
    parser.add_argument("--step", type=whole_number(0), default=None, metavar="K",
                        help="for a run: the step to show (default: the last complete one)")
    parser.add_argument("--width", type=whole_number(4, 1000), default=16, metavar="N",
                        help="characters of each histogram sparkline (default 16)")
    parser.set_defaults(func=inspect_command)


def header(snap: Snapshot) -> str:
    """Two lines: where the snapshot came from, and its totals."""
    m = snap.manifest
    count = len(snap.gradient_names())
    return (
        f"{snap.path}: step {m['step']} of {m.get('model', '?')} on {m.get('device', '?')} "
        f"(torch {m.get('torch_version', '?')}, gradexplorer {m.get('gradexplorer_version', '?')}, "
        f"{m.get('created', '?')})\n"
        f"{count} gradients, {m.get('total_numel', 0):,} numbers, "
        f"global norm {number(snap.global_norm)}"
    )


def parameter_rows(snap: Snapshot, width: int) -> list[list[str]]:
    """One row per parameter: name, shape, norm, max |g|, NaN/Inf, sparkline."""
    from gradexplorer.core.stats.histogram import sparkline  # (numpy)

    rows = []
    for name, s in snap.stats.items():
        if not s.has_grad:
            rows.append([name, format_shape(s.shape), "no grad", "", "", ""])
            continue
        hist = snap.histograms.get(name)
        spark = sparkline(hist.counts, width) if hist is not None else ""
        rows.append([name, format_shape(s.shape), number(s.whole("norm")), number(s.whole("abs_max")),
                     f"{s.nan_count}/{s.inf_count}", f"|{spark}|" if spark else ""])
    return rows


def inspect_command(args: argparse.Namespace) -> int:
    if is_run_dir(args.snapshot):
        from gradexplorer.commands.run_tables import inspect_run

        return inspect_run(args.snapshot, args.step, args.width)
    from gradexplorer.core.snapshot import read_snapshot

    if args.step is not None:
        raise UserError("--step applies to a run directory; a snapshot holds one step")
    snap = read_snapshot(args.snapshot)
    print(header(snap))
    headers = ["parameter", "shape", "norm", "max |g|", "NaN/Inf", "histogram"]
    print(table(headers, parameter_rows(snap, args.width), left=2))
    extras = snap.manifest.get("extra_tensors", [])
    if extras:
        print("captured tensors: " + ", ".join(
            f"{e['key']} {format_shape(e['shape'])}" for e in extras))
    hooks = snap.manifest.get("hooks", [])
    if hooks:
        print("hooks: " + "; ".join(
            ", ".join(f"{k}={v}" for k, v in h.items()) if isinstance(h, dict) else str(h)
            for h in hooks))
    return 0
