"""Compare two snapshots: norm ratio, cosine similarity and histogram distance per parameter."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from gradexplorer.core.errors import UserError
from gradexplorer.core.snapshot.read import Snapshot, read_snapshot
from gradexplorer.core.stats.histogram import histogram_w1, mixture_w1

TOTAL = "(all gradients)"


@dataclass
class ParamComparison:
    """How one gradient (or the whole gradient vector) differs between snapshots A and B."""

    name: str
    numel: int
    norm_a: float
    norm_b: float
    norm_ratio: float  # ‖B‖ / ‖A‖
    cosine: float  # cos(A, B); NaN if either is zero or not finite
    hist_distance: float | None  # earth mover's distance between the histograms (value units)
    nonfinite_a: int = 0  # NaN and ±Inf elements, left out of the norms and cosine (as inspect)
    nonfinite_b: int = 0


@dataclass
class Comparison:
    """Rows for parameters both snapshots hold, the whole-vector row, and what differs."""

    a: Snapshot
    b: Snapshot
    rows: list[ParamComparison]
    total: ParamComparison
    only_in_a: list[str] = field(default_factory=list)
    only_in_b: list[str] = field(default_factory=list)
    shape_mismatch: list[str] = field(default_factory=list)


def _ratio(a: float, b: float) -> float:
    if a == 0:
        return math.nan if b == 0 else math.inf
    return b / a


def _cosine(dot: float, na: float, nb: float) -> float:
    return dot / (na * nb) if na > 0 and nb > 0 else math.nan


def _finite(g: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Float64 values with NaN/±Inf set to 0 (the statistics' finite-only norm), and their count."""
    a = g.reshape(-1).double()
    finite = torch.isfinite(a)
    return torch.where(finite, a, 0.0), int(a.numel() - finite.sum())


def _row(name: str, ga: torch.Tensor, gb: torch.Tensor, ha, hb) -> tuple[ParamComparison, float]:
    (a, bad_a), (b, bad_b) = _finite(ga), _finite(gb)
    na, nb, dot = float(a.norm()), float(b.norm()), float(a @ b)
    dist = histogram_w1(ha.edges, ha.counts, hb.edges, hb.counts) if ha and hb else None
    return ParamComparison(name, a.numel(), na, nb, _ratio(na, nb), _cosine(dot, na, nb), dist,
                           bad_a, bad_b), dot


def compare_snapshots(a: Snapshot | str, b: Snapshot | str) -> Comparison:
    """Compare gradients of the parameters that both snapshots hold with the same shape."""
    a = a if isinstance(a, Snapshot) else read_snapshot(a)
    b = b if isinstance(b, Snapshot) else read_snapshot(b)
    names_a, names_b = a.gradient_names(), set(b.gradient_names())
    shapes_a = {p["name"]: p["shape"] for p in a.parameters}
    shapes_b = {p["name"]: p["shape"] for p in b.parameters}
    common = [n for n in names_a if n in names_b and shapes_a[n] == shapes_b[n]]
    if not common:
        raise UserError(f"{a.path} and {b.path} hold no gradients of the same name and shape")
    ga, gb = a.gradients(common), b.gradients(common)
    rows, dots = [], []
    for n in common:
        row, dot = _row(n, ga[n], gb[n], a.histograms.get(n), b.histograms.get(n))
        rows.append(row)
        dots.append(dot)
    na = math.sqrt(sum(r.norm_a**2 for r in rows))
    nb = math.sqrt(sum(r.norm_b**2 for r in rows))
    have_hists = all(n in a.histograms and n in b.histograms for n in common)
    dist = mixture_w1([(a.histograms[n].edges, a.histograms[n].counts) for n in common],
                      [(b.histograms[n].edges, b.histograms[n].counts) for n in common]) \
        if have_hists else None
    total = ParamComparison(TOTAL, sum(r.numel for r in rows), na, nb, _ratio(na, nb),
                            _cosine(sum(dots), na, nb), dist,
                            sum(r.nonfinite_a for r in rows), sum(r.nonfinite_b for r in rows))
    return Comparison(
        a, b, rows, total,
        only_in_a=[n for n in names_a if n not in names_b],
        only_in_b=[n for n in b.gradient_names() if n not in set(names_a)],
        shape_mismatch=[n for n in names_a if n in names_b and shapes_a[n] != shapes_b[n]],
    )
