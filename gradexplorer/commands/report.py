"""``gradexplorer report RUN --out report.html``: one self-contained HTML page of a run."""

from __future__ import annotations

import argparse
import contextlib
import time

from gradexplorer.commands.flag_values import whole_number
from gradexplorer.commands.progress import ProgressLines
from gradexplorer.core.files.output_path import check_output_file
from gradexplorer.core.messages.errors import UserError


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "report", help="write a self-contained HTML report of a run (to share; opens in any browser)",
        description="One HTML file, nothing fetched when viewed: the run's loss and norm curves "
        "(with smoothing and CSV), the ranked module and parameter tables, heat maps and "
        "distribution bands of the top parameters, NaN/Inf events and where they started, hooks.")
    parser.add_argument("run", metavar="RUN", help="a run directory written by gradexplorer.watch")
    parser.add_argument("others", metavar="OTHER", nargs="*",
                        help="more runs whose loss and norm curves are overlaid on RUN's")
    parser.add_argument("--out", required=True, metavar="FILE", help="the HTML file to write")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace --out if it exists (default: refuse)")
    parser.add_argument("--top", type=whole_number(0), default=6, metavar="N",
                        help="parameters drawn in full: NaN/Inf ones first, then the largest norms "
                        "(default 6)")
    parser.set_defaults(func=report_command)


def report_command(args: argparse.Namespace) -> int:
    from gradexplorer.core.runs.history import RunHistory
    from gradexplorer.core.runs.run import open_run
    from gradexplorer.core.share.report_html import write_report

    out = check_output_file(args.out, overwrite=args.overwrite)
    start = time.perf_counter()
    with contextlib.ExitStack() as stack:
        run = stack.enter_context(open_run(args.run))
        others = [stack.enter_context(open_run(p)) for p in args.others]
        for r in (run, *others):
            if r.last_step is None:
                raise UserError(f"run {str(r.path)!r} has no complete step yet")
        steps = RunHistory(run).step_count()
        progress = ProgressLines("report", steps)
        size = write_report(run, out, args.top, others, progress.stage)
        progress.close()
        params = len(run.parameters)
    also = f", {len(others)} more run(s) overlaid" if others else ""
    print(f"report of {steps:,} steps x {params} parameters{also}: {out} ({size / 1e6:.2f} MB, "
          f"{time.perf_counter() - start:.2f} s)")
    return 0
