"""``gradexplorer compare A B``: how the gradients of two snapshots differ."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gradexplorer.commands.flag_values import whole_number
from gradexplorer.commands.table_text import number, table
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.messages.printable import printable
from gradexplorer.core.runs.schema import is_run_dir

if TYPE_CHECKING:
    from gradexplorer.core.snapshot import ParamComparison


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "compare", help="compare two snapshots, two runs, or two steps of a run: norm ratio, "
                        "cosine, histogram distance"
    )
    parser.add_argument("a", metavar="A", help="first snapshot or run directory")
    parser.add_argument("b", metavar="B", nargs="?", default=None,
                        help="second snapshot or run directory (omit with --steps for one run)")
    parser.add_argument("--steps", type=whole_number(0), nargs=2, metavar=("K", "L"), default=None,
                        help="runs: step K of A against step L of B (or of A when B is omitted); "
                             "default the last step of each")
    parser.set_defaults(func=compare_command)


def _cells(r: ParamComparison) -> list[str]:
    return [r.name, number(r.norm_a), number(r.norm_b), number(r.norm_ratio),
            number(r.cosine), number(r.hist_distance, 3)]


def compare_command(args: argparse.Namespace) -> int:
    runs = [is_run_dir(p) for p in (args.a, args.b) if p is not None]
    if any(runs):
        if not all(runs):
            raise UserError("compare a run with a run, or a snapshot with a snapshot")
        from gradexplorer.commands.run_tables import compare_runs

        return compare_runs(args.a, args.b, args.steps)
    from gradexplorer.core.snapshot import compare_snapshots, read_snapshot

    if args.b is None or args.steps is not None:
        raise UserError("compare two snapshots: gradexplorer compare A B (--steps is for runs)")
    a, b = read_snapshot(args.a), read_snapshot(args.b)
    result = compare_snapshots(a, b)
    for label, snap in (("A", a), ("B", b)):
        print(f"{label}: {snap.path} (step {snap.step} of {snap.manifest.get('model', '?')})")
    headers = ["parameter", "norm A", "norm B", "B/A", "cosine", "hist EMD"]
    rows = [_cells(r) for r in result.rows] + [_cells(result.total)]
    print(table(headers, rows))
    for label, names in (("only in A", result.only_in_a), ("only in B", result.only_in_b),
                         ("shapes differ", result.shape_mismatch)):
        if names:
            print(printable(f"{label}: {', '.join(names)}"))
    print("hist EMD: earth mover's distance between the gradient histograms, in gradient units")
    return 0
