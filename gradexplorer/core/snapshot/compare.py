"""Compare two snapshots: norm ratio, cosine similarity and histogram distance per parameter."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from gradexplorer.core.files.safetensors_file import SafetensorsFile
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.snapshot import format as F
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


def _finite(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Float64 values with NaN/±Inf set to 0 (the statistics' finite-only norm), and their count."""
    finite = np.isfinite(values)
    bad = int(values.size - np.count_nonzero(finite))
    return (np.where(finite, values, 0.0) if bad else values), bad


def _row(name: str, ra: SafetensorsFile, rb: SafetensorsFile, ha, hb) -> tuple[ParamComparison, float]:
    """Norms and dot product in float64 over finite values, streamed chunk by chunk through both files."""
    sa = sb = dot = 0.0
    bad_a = bad_b = 0
    for chunk_a, chunk_b in zip(ra.chunks(name), rb.chunks(name), strict=True):
        (a, na_bad), (b, nb_bad) = _finite(chunk_a), _finite(chunk_b)
        bad_a, bad_b = bad_a + na_bad, bad_b + nb_bad
        sa += float(a @ a)
        sb += float(b @ b)
        dot += float(a @ b)
    na, nb = math.sqrt(sa), math.sqrt(sb)
    dist = histogram_w1(ha.edges, ha.counts, hb.edges, hb.counts) if ha and hb else None
    return ParamComparison(name, ra.numel(name), na, nb, _ratio(na, nb), _cosine(dot, na, nb),
                           dist, bad_a, bad_b), dot


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
    rows, dots = [], []
    with SafetensorsFile(a.path / F.GRADIENTS_FILE) as ra, SafetensorsFile(b.path / F.GRADIENTS_FILE) as rb:
        for n in common:  # one gradient at a time, a chunk at a time: memory stays small
            row, dot = _row(n, ra, rb, a.histograms.get(n), b.histograms.get(n))
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
