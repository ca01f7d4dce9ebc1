"""``gradexplorer export RUN --to FORMAT DEST``: a run into TensorBoard, wandb, CSV or Parquet."""

from __future__ import annotations

import argparse

from gradexplorer.commands.flag_values import name_list, whole_number
from gradexplorer.commands.progress import ProgressLines
from gradexplorer.commands.renamed_flags import add_renamed
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.stats import STAT_FIELDS

TARGETS = ("tensorboard", "csv", "parquet", "wandb")


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "export", help="export a run to TensorBoard, wandb (offline), CSV or Parquet",
        description="Write a run directory's exact histograms and figures where a team's "
        "dashboards read them: TensorBoard event files (DEST: a log folder; the run goes into "
        "DEST/RUN_NAME), an offline wandb run (DEST: its folder; `wandb sync` uploads it), or "
        "a long-form table, one row per step x parameter x figure (DEST: a .csv or .parquet file).",
    )
    parser.add_argument("run", metavar="RUN", help="a run directory written by gradexplorer.watch")
    parser.add_argument("--to", required=True, choices=TARGETS, dest="target",
                        help="what to write")
    parser.add_argument("dest", metavar="DEST", help="where to write it")
    add_renamed(parser, "--every", "--stride", "stride", type=whole_number(1), default=1, metavar="K",
                help="every K-th recorded step, the last, and every flagged step: spike events, "
                "NaN/Inf steps, skipped steps (default: every step)")
    parser.add_argument("--params", action="append", metavar="GLOB",
                        help="only parameters matching GLOB, e.g. 'layer1.*' (repeatable)")
    parser.add_argument("--figures", type=name_list, metavar="LIST",
                        help=f"per-parameter figures, comma-separated (default all: {','.join(STAT_FIELDS)})")
    parser.add_argument("--histograms", action=argparse.BooleanOptionalAction, default=None,
                        help="the histograms too (default: yes for tensorboard and wandb; "
                        "for csv and parquet one row per bin, so no)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace TensorBoard events an earlier export left in DEST/RUN_NAME, "
                        "or an existing .csv/.parquet DEST (default: refuse)")
    parser.add_argument("--project", default="gradexplorer", help="the wandb project (default gradexplorer)")
    parser.set_defaults(func=export_command)


def flagged_line(flagged: dict[int, list[str]], stride: int, shown: int = 10) -> str:
    """What ``--stride`` kept beyond every K-th step: the flagged steps, each with why."""
    if not flagged:
        return f"--stride {stride}: no flagged step (spike, NaN/Inf, skipped) between the steps kept"
    items = [f"{step} ({', '.join(why)})" for step, why in list(flagged.items())[:shown]]
    more = f", … {len(flagged) - shown} more" if len(flagged) > shown else ""
    return (f"--stride {stride}: also kept {len(flagged)} flagged step(s) it would skip: "
            f"{', '.join(items)}{more}")


def export_command(args: argparse.Namespace) -> int:
    from gradexplorer.core.files.output_path import check_output_file, check_output_folder
    from gradexplorer.core.runs.history import RunHistory
    from gradexplorer.core.runs.run import open_run
    from gradexplorer.core.share.selection import select

    if args.target in ("csv", "parquet"):
        if not str(args.dest).lower().endswith(f".{args.target}"):
            raise UserError(f"--to {args.target} writes a .{args.target} file; "
                            f"give DEST ending in .{args.target}")
        check_output_file(args.dest, overwrite=args.overwrite, make_folders=True)
    else:
        check_output_folder(args.dest)

    histograms = args.histograms if args.histograms is not None \
        else args.target in ("tensorboard", "wandb")
    figures = [f.strip() for f in args.figures.split(",") if f.strip()] if args.figures else None
    with open_run(args.run) as run:
        history = RunHistory(run)
        keep = history.flagged_steps() if args.stride > 1 else {}
        selection = select(run, args.stride, args.params, figures, histograms, keep)
        if args.stride > 1:
            print(flagged_line(selection.flagged, args.stride))
        progress = ProgressLines("export", len(selection.steps))
        count = f"{len(selection.steps)} steps x {len(selection.params or run.parameters)} parameters"
        if args.target == "tensorboard":
            from gradexplorer.core.share.tensorboard_events import export_tensorboard

            folder = export_tensorboard(history, selection, args.dest, overwrite=args.overwrite,
                                        progress=progress)
            progress.close()
            print(f"TensorBoard events of {count} in {folder}; view: tensorboard --logdir {args.dest}")
        elif args.target == "wandb":
            from gradexplorer.core.share.wandb_run import export_wandb

            folder = export_wandb(history, selection, args.dest, project=args.project, progress=progress)
            progress.close()
            print(f"offline wandb run of {count} in {folder}; upload: wandb sync {folder}")
        else:
            from gradexplorer.core.share.long_form import long_rows, write_csv_long, write_parquet_long

            rows = long_rows(history, selection.steps, selection.params, histograms, selection.figures,
                             progress)
            write = write_csv_long if args.target == "csv" else write_parquet_long
            written = write(rows, args.dest)
            progress.close()
            print(f"{written:,} rows ({count}) in {args.dest}")
    return 0
