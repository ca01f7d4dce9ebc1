"""``run`` options for gradient statistics, histograms, snapshots, and NaN/Inf alarms."""

from __future__ import annotations

import argparse
import math
import sys
from typing import TYPE_CHECKING, TextIO

from gradexplorer.commands.export_options import (
    add_export_arguments,
    attach_exporter,
    check_export_arguments,
)
from gradexplorer.commands.flag_values import whole_number
from gradexplorer.commands.renamed_flags import add_renamed

if TYPE_CHECKING:  # (torch and numpy: imported when a run starts, not for --help)
    from gradexplorer.core.snapshot.export_dir import ExportFolder
    from gradexplorer.core.stack.assembly import SessionStack
    from gradexplorer.core.stats.monitor import GradientMonitor

MAX_NAMED = 4  # parameters named in one alarm line


def add_gradient_arguments(parser: argparse.ArgumentParser) -> None:
    """``--export`` and its options, ``--histogram-every`` (old name ``--every``), ``--bins``,
    ``--hist-range``."""
    g = parser.add_argument_group("gradients")
    add_export_arguments(g)
    add_renamed(g, "--every", "--histogram-every", "histogram_every", type=whole_number(1), metavar="K",
                help="compute histograms every K steps (default 1; statistics every step)")
    g.add_argument("--bins", type=whole_number(1, 4096), metavar="N", help="histogram bins (default 64)")
    g.add_argument("--hist-range", metavar="auto|symmetric|LO,HI",
                   help="histogram range: each gradient's finite min..max (auto, default), "
                   "±max|g| (symmetric) or fixed LO,HI (write --hist-range=-0.1,0.1)")


def monitor_from_args(args: argparse.Namespace) -> GradientMonitor | None:
    """A GradientMonitor when any gradient option was given, else None."""
    check_export_arguments(args)
    wanted = (args.export, args.histogram_every, args.bins, args.hist_range)
    if all(v is None for v in wanted):
        return None
    from gradexplorer.core.stats.histogram import parse_hist_range
    from gradexplorer.core.stats.monitor import GradientMonitor

    return GradientMonitor(
        bins=args.bins or 64, histogram_every=args.histogram_every or 1,
        hist_range=parse_hist_range(args.hist_range)
    )


def attach_gradient_options(session, args: argparse.Namespace, stream: TextIO | None = None,
                            hooks=None, reporters: tuple = ()
                            ) -> tuple[SessionStack, ExportFolder | None]:
    """Build ``session``'s stack (``core/stack/assembly.py``) with what ``args`` ask for: the
    monitor, ``hooks`` (a HookRegistry: its hooks and captured tensors go in snapshots), where
    a NaN/Inf was born, ``reporters`` (the spike lines), the exporter and the NaN/Inf alarm.

    Returns the stack and the claimed ``--export`` folder, which the caller releases when the
    run ends.
    """
    from gradexplorer.core.stack.assembly import SessionStack

    stream = stream or sys.stdout
    monitor = monitor_from_args(args)
    stack = SessionStack.on(session, monitor, hooks if hooks is not None and hooks.attached()
                            else None, reporters=reporters, publishers=(NonFiniteAlarm(stream),))
    folder = None
    if args.export:
        folder = attach_exporter(session, args, stack, lambda t: print_line(t, stream))
    return stack, folder


def print_line(text: str, stream: TextIO) -> None:
    """Print a line, first clearing a live progress bar on a terminal."""
    live = bool(getattr(stream, "isatty", lambda: False)())
    stream.write(("\r\x1b[K" if live else "") + text + "\n")
    stream.flush()


class NonFiniteAlarm:
    """Prints one line for each step whose gradients hold NaN or ±Inf, and where they were born."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def after_step(self, session, result) -> None:
        record = result.gradients
        if record is not None:
            bad = {n: (s.nan_count, s.inf_count) for n, s in record.nonfinite().items()}
        elif result.grad_norm is not None and not math.isfinite(result.grad_norm):
            from gradexplorer.core.stats.monitor import nonfinite_counts

            bad = nonfinite_counts(session.model)
        else:
            return
        if bad:
            print_line(alarm_text(result.step, bad, len(list(session.model.parameters()))),
                       self.stream)
            origin = result.nonfinite_origin
            if origin is not None:
                print_line(f"    {origin['text']}", self.stream)


def alarm_text(step: int, bad: dict[str, tuple[int, int]], total: int) -> str:
    """``step 3: NaN/Inf gradients in 2 of 10 parameters: fc1.weight (12 NaN), …``."""
    parts = []
    for name, (nans, infs) in list(bad.items())[:MAX_NAMED]:
        counts = [f"{nans:,} NaN" if nans else "", f"{infs:,} Inf" if infs else ""]
        parts.append(f"{name} ({', '.join(c for c in counts if c)})")
    more = f", … {len(bad) - MAX_NAMED} more" if len(bad) > MAX_NAMED else ""
    return f"  ! step {step}: NaN/Inf gradients in {len(bad)} of {total} parameters: " \
        f"{', '.join(parts)}{more}"
