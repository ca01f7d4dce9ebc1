"""``gradexplorer compare A B``: how the gradients of two snapshots differ."""

from __future__ import annotations

import argparse

from gradexplorer.commands.table_text import number, table
from gradexplorer.core.snapshot import ParamComparison, compare_snapshots, read_snapshot


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "compare", help="compare two snapshots: norm ratio, cosine, histogram distance"
    )
    parser.add_argument("a", metavar="A", help="first snapshot directory")
    parser.add_argument("b", metavar="B", help="second snapshot directory")
    parser.set_defaults(func=compare_command)


def _cells(r: ParamComparison) -> list[str]:
    return [r.name, number(r.norm_a), number(r.norm_b), number(r.norm_ratio),
            number(r.cosine), number(r.hist_distance, 3)]


def compare_command(args: argparse.Namespace) -> int:
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
            print(f"{label}: {', '.join(names)}")
    print("hist EMD: earth mover's distance between the gradient histograms, in gradient units")
    return 0
