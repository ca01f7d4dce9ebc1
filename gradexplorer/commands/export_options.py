"""``run --export DIR``: the folder claimed before step 1, retention, and a disk estimate."""

from __future__ import annotations

import argparse
import shutil
from typing import TYPE_CHECKING

from gradexplorer.commands.flag_values import whole_number
from gradexplorer.commands.renamed_flags import add_renamed
from gradexplorer.core.messages.errors import UserError

if TYPE_CHECKING:  # (torch: imported when a run exports, not for --help)
    from gradexplorer.core.snapshot.export_dir import ExportFolder
    from gradexplorer.core.snapshot.exporter import SnapshotExporter

WARN_BYTES = 2 * 10**9  # say so before a run that will leave more than this on disk


def add_export_arguments(group: argparse._ArgumentGroup) -> None:
    """``--export``, ``--snapshot-every``, ``--keep-snapshots``, ``--overwrite`` (and the old
    names ``--export-every``, ``--keep-last``)."""
    group.add_argument("--export", metavar="DIR",
                       help="write gradient snapshots to DIR/step-NNNNNN (at the last step, "
                       "and every --snapshot-every steps)")
    add_renamed(group, "--export-every", "--snapshot-every", "snapshot_every",
                type=whole_number(1), metavar="K",
                help="also snapshot every K steps (default: the last step only)")
    add_renamed(group, "--keep-last", "--keep-snapshots", "keep_snapshots", type=whole_number(1), metavar="N",
                help="keep only the newest N snapshots of this run (default: all)")
    group.add_argument("--overwrite", action="store_true",
                       help="replace the snapshots an earlier run left in DIR (default: refuse)")


def check_export_arguments(args: argparse.Namespace) -> None:
    """Refuse export options that make no sense together."""
    if args.snapshot_every is not None and not args.export:
        raise UserError("--snapshot-every needs --export DIR")
    if args.keep_snapshots is not None and not args.export:
        raise UserError("--keep-snapshots needs --export DIR")


def attach_exporter(session, args: argparse.Namespace, stack, say) -> ExportFolder:
    """Claim ``--export DIR`` (checked, locked, leftovers cleaned) and add the exporter to
    ``stack`` (the session's ``SessionStack``).

    ``say(text)`` prints a line. The caller releases the returned folder when the run ends.
    """
    from gradexplorer.core.snapshot.export_dir import ExportFolder

    first, last = session.step_count + 1, session.step_count + args.steps
    folder = ExportFolder(args.export, overwrite=args.overwrite).claim()
    exporter = None
    try:
        if folder.removed:
            say(f"  removed {len(folder.removed)} earlier snapshot or unfinished folder(s) "
                f"from {args.export}")
        exporter = stack.exporter(args.export, args.snapshot_every or 0, last,
                                  args.keep_snapshots,
                                  wrote=lambda step, path: say(f"  snapshot of step {step}: {path}"))
        warn_about_size(session, exporter, first, last, stack.monitor, say)
    except BaseException:
        if exporter is not None:
            stack.stop_exporting(exporter)
        folder.release()
        raise
    return folder


def _megabytes(size: int) -> str:
    """A snapshot's size in MB that never reads 0: 0.29, 4.2, 47."""
    mb = size / 1e6
    return f"{mb:,.0f}" if mb >= 10 else f"{mb:.2g}"


def warn_about_size(session, exporter: SnapshotExporter, first: int, last: int, monitor,
                    say) -> None:
    """A line before a run that will leave more than a few GB; a refusal if it cannot fit."""
    from gradexplorer.core.snapshot.exporter import snapshot_bytes

    bins = monitor.bins if monitor is not None else 64
    each = snapshot_bytes(session.model, bins)
    kept, written = exporter.kept(first, last), exporter.planned(first, last)
    total = kept * each
    free = shutil.disk_usage(exporter.directory).free
    if total > free:
        raise UserError(
            f"{kept} snapshots of about {_megabytes(each)} MB need {total / 1e9:,.1f} GB in "
            f"{exporter.directory}, which has {free / 1e9:,.1f} GB free: export less often "
            "(--snapshot-every) or keep fewer (--keep-snapshots N)"
        )
    if total > WARN_BYTES:
        note = "" if exporter.keep_snapshots else "; --keep-snapshots N keeps only the newest N"
        say(f"  note: {written} snapshots of about {_megabytes(each)} MB will leave about "
            f"{total / 1e9:,.1f} GB in {exporter.directory}{note}")
