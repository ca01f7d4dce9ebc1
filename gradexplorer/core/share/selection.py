"""Which steps, parameters and figures an export takes (the command line's --every, --params,
--figures)."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.runs.run import Run
from gradexplorer.core.stats.records import STAT_FIELDS


@dataclass(frozen=True)
class ExportSelection:
    """Steps, parameters (None: all) and STAT_FIELDS figures to export; histograms or not."""

    steps: list[int]
    params: list[str] | None
    figures: tuple[str, ...] = STAT_FIELDS
    histograms: bool = True
    flagged: dict[int, list[str]] = field(default_factory=dict)  # kept beyond the stride: why


def select(run: Run, every: int = 1, patterns: Sequence[str] | None = None,
           figures: Sequence[str] | None = None, histograms: bool = True,
           keep: Mapping[int, list[str]] | None = None) -> ExportSelection:
    """Every ``every``-th recorded step (the last always, and every step of ``keep``: the
    run's flagged steps, ``RunHistory.flagged_steps``), the parameters matching any of the
    glob ``patterns``, the named figures; each checked, with one line when wrong."""
    if every < 1:
        raise UserError(f"--stride must be a positive number of steps, got {every}")
    steps = run.steps
    if not steps:
        raise UserError(f"run {str(run.path)!r} has no complete step yet")
    picked = steps[::every]
    if picked[-1] != steps[-1]:
        picked.append(steps[-1])
    chosen_steps, held = set(picked), set(steps)
    flagged = {s: list(why) for s, why in (keep or {}).items() if s in held and s not in chosen_steps}
    if flagged:
        picked = sorted(chosen_steps | set(flagged))
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
    return ExportSelection(picked, params, chosen, histograms, flagged)
