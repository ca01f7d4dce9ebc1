"""``run --per-sample-norms``: each step's per-sample gradient norms, one line a step."""

from __future__ import annotations

import argparse
import sys


def add_per_sample_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("per-sample gradient norms (docs/per_sample.md)")
    g.add_argument("--per-sample-norms", action="store_true",
                   help="print each step's per-sample gradient norms (median, p90, max and "
                   "the sample) without per-sample gradients in memory")
    g.add_argument("--per-sample-reduction", choices=("mean", "sum"), default="mean",
                   help="how the loss combines the samples' losses (default mean: the norms "
                   "are those of each sample's own loss)")


def attach_per_sample(session, args: argparse.Namespace, stream=None):
    """The session's PerSampleObserver when ``--per-sample-norms`` was given (its modules
    without figures named in one line first), else None; the caller removes it."""
    if not args.per_sample_norms:
        return None
    from gradexplorer.commands.gradient_options import print_line
    from gradexplorer.core.persample.observer import PerSampleObserver

    stream = stream or sys.stdout
    observer = PerSampleObserver(session.model, args.per_sample_reduction, lambda step, fig: (
        print_line(f"  step {step}: {fig.summary()}", stream)))
    if observer.unsupported:
        print_line("per-sample gradient norms leave out " + "; ".join(
            f"{name}: {why}" for name, why in observer.unsupported.items()), stream)
    session.add_observer(observer)
    observer.remove = _removing(session, observer)
    return observer


def _removing(session, observer):
    remove = observer.remove

    def both() -> None:
        session.remove_observer(observer)
        remove()
    return both
