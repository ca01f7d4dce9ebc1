"""Compare two recorded steps (of one run or of two runs) from their figures and histograms."""

from __future__ import annotations

import math

from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.runs.run import Run
from gradexplorer.core.snapshot.compare import TOTAL, ParamComparison, _ratio
from gradexplorer.core.stats.histogram import histogram_w1, mixture_w1


def compare_run_steps(a: Run, step_a: int, b: Run, step_b: int) -> list[ParamComparison]:
    """A row per parameter both steps hold (cosine is NaN: runs keep figures, not gradients),
    then the whole-gradient row."""
    stats_a, stats_b = a.figures(step_a), b.figures(step_b)
    common = [n for n in stats_a if n in stats_b]
    if not common:
        raise UserError(f"{a.path} step {step_a} and {b.path} step {step_b} share no parameter")
    hists_a, hists_b = a.histograms(step_a), b.histograms(step_b)
    numel = {p["name"]: p["numel"] for p in a.structure.get("parameters", [])}
    rows = []
    for n in common:
        na, nb = stats_a[n]["norm"], stats_b[n]["norm"]
        ha, hb = hists_a.get(n), hists_b.get(n)
        dist = histogram_w1(ha.edges, ha.counts, hb.edges, hb.counts) if ha and hb else None
        rows.append(ParamComparison(n, numel.get(n, 0), na, nb, _ratio(na, nb), math.nan, dist))
    na = math.sqrt(sum(r.norm_a**2 for r in rows))
    nb = math.sqrt(sum(r.norm_b**2 for r in rows))
    both = all(n in hists_a and n in hists_b for n in common)
    dist = mixture_w1([(hists_a[n].edges, hists_a[n].counts) for n in common],
                      [(hists_b[n].edges, hists_b[n].counts) for n in common]) if both else None
    total = ParamComparison(TOTAL, sum(r.numel for r in rows), na, nb, _ratio(na, nb), math.nan,
                            dist)
    return [*rows, total]
