"""Which steps, parameters and figures an export takes (the command line's --every, --params,
--figures)."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass

from gradexplorer.core.errors import UserError
from gradexplorer.core.recorder.run import Run
from gradexplorer.core.stats.records import STAT_FIELDS


@dataclass(frozen=True)
class ExportSelection:
    """Steps, parameters (None: all) and STAT_FIELDS figures to export; histograms or not."""

    steps: list[int]
    params: list[str] | None
    figures: tuple[str, ...] = STAT_FIELDS
    histograms: bool = True


def select(run: Run, every: int = 1, patterns: Sequence[str] | None = None,
           figures: Sequence[str] | None = None, histograms: bool = True) -> ExportSelection:
    """Every ``every``-th recorded step (the last always), the parameters matching any of the
    glob ``patterns``, the named figures; each checked, with one line when wrong."""
    if every < 1:
        raise UserError(f"--every must be a positive number of steps, got {every}")
    steps = run.steps
    if not steps:
        raise UserError(f"run {str(run.path)!r} has no complete step yet")
    picked = steps[::every]
    if picked[-1] != steps[-1]:
        picked.append(steps[-1])
    params = None
    if patterns:
        names = run.parameters
        params = [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns)]
        if not params:
            raise UserError(f"no parameter matches {', '.join(patterns)} "
                            f"(the run has {', '.join(names[:4])}{', …' if len(names) > 4 else ''})")
    chosen = tuple(figures) if figures else STAT_FIELDS
    unknown = [f for f in chosen if f not in STAT_FIELDS]
    if unknown:
        raise UserError(f"unknown figure {unknown[0]!r}: choose from {', '.join(STAT_FIELDS)}")
    return ExportSelection(picked, params, chosen, histograms)
