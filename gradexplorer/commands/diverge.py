"""``gradexplorer diverge A B``: the first step at which two runs part, and who parted first."""

from __future__ import annotations

import argparse

from gradexplorer.commands.flag_values import real_number, whole_number
from gradexplorer.commands.table_text import number, table
from gradexplorer.core.runs.divergence import DEFAULT_TOL


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("diverge", help="find the first step at which two runs' gradient "
                                            "figures differ, and the parameters that differ most")
    parser.add_argument("a", metavar="RUN_A", help="a run directory")
    parser.add_argument("b", metavar="RUN_B", help="another run directory")
    parser.add_argument("--tol", type=real_number(0), default=DEFAULT_TOL, metavar="REL",
                        help=f"relative gap a figure may have (default {DEFAULT_TOL:g})")
    parser.add_argument("--top", type=whole_number(1), default=8, metavar="N",
                        help="parameters listed at the divergence (default 8)")
    parser.set_defaults(func=diverge_command)


def diverge_command(args: argparse.Namespace) -> int:
    from gradexplorer.core.runs.compare import compare_run_steps
    from gradexplorer.core.runs.divergence import find_divergence
    from gradexplorer.core.runs.run import open_run

    a, b = open_run(args.a), open_run(args.b)
    result = find_divergence(a, b, args.tol)
    span = f"{result.compared[0]}..{result.compared[-1]}"
    if not result.diverged:
        print(f"no divergence: {len(result.compared)} common step(s) ({span}) agree within "
              f"{result.tol:g} (relative) on every figure")
        return 0
    print(f"diverged at step {result.step} (common steps {span} compared; tolerance "
          f"{result.tol:g} relative)")
    for name, s in result.signals.items():
        print(f"  {name.replace('_', ' ')}: A {number(s['a'])}, B {number(s['b'])}, "
              f"gap {s['gap']:.3g}")
    emd = {r.name: r.hist_distance for r in compare_run_steps(a, result.step, b, result.step)}
    rows = [[r["name"], r["figure"].replace("_", " "), number(r["a"]), number(r["b"]),
             f"{r['gap']:.3g}", number(emd.get(r["name"]), 3)]
            for r in result.ranking[:max(1, args.top)]]
    if rows:
        print(table(["parameter", "figure", "A", "B", "gap", "hist EMD"], rows, left=2))
    left = len(result.ranking) - len(rows)
    if left > 0:
        print(f"  … {left} more parameter(s) differ")
    print(f"gap: |A - B| / max(|A|, |B|) of the parameter's most different figure; "
          f"gradexplorer compare {a.path} {b.path} --steps {result.step} {result.step} "
          "shows every parameter")
    return 0
