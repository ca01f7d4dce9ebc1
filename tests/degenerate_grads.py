"""Constant, 1-element and two-valued gradients from ±5e-324 to ±max float, every dtype.

The fuzz cases of ``test_stats_degenerate`` (Numba and fused torch paths) and of
``stats_triton_checks`` (the Triton kernels, interpreted): every histogram equals
``np.histogram`` on its own reported edges; where numpy itself cannot build edges (an empty
range it cannot widen by ±0.5, neighbouring floats, a range whose width overflows) the
reported edges follow the rule of ``histogram.fallback_range`` bit for bit: finite, strictly increasing,
holding every value, and ``lo … hi`` exactly when the width overflowed.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import torch
from stats_reference import Holder

from gradexplorer.core.stats.histogram import histogram_edges
from gradexplorer.session import gradient_stats

MAX = float(np.finfo(np.float64).max)
MAGNITUDES = [5e-324, 1e-310, 1e-300, 1.4e-45, 6e-8, 1.0, 1 + 2**-23, 65504.0, 2.0**24,
              2.0**52, 2.0**52 + 1, 2.0**53, 5.35e17, 3e38, 1e300, 1.7e308, MAX]
DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def _values(magnitude: float) -> dict[str, np.ndarray]:
    """The awkward shapes around one magnitude (float64; cast to the dtype later)."""
    v = np.float64(magnitude)
    with np.errstate(over="ignore"):
        up = np.nextafter(v, np.inf)  # Inf above max float
    return {
        "single": np.array([v]), "single_neg": np.array([-v]),
        "constant": np.full(7, -v), "pair": np.array([v, -v]),
        "neighbours": np.array([v, up, v, v]), "with_zero": np.array([0.0, v, 0.0]),
        "double": np.array([v, v / 2, v / 2]),
    }


def degenerate_grads(dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """Every case in ``dtype`` (values beyond its range become ±Inf, as a cast would)."""
    out = {}
    for m, magnitude in enumerate(MAGNITUDES):
        for shape, values in _values(magnitude).items():
            out[f"m{m}_{shape}"] = torch.from_numpy(values).to(dtype)
    out["extremes"] = torch.tensor([-MAX, MAX], dtype=torch.float64).to(dtype)
    out["scalar"] = torch.tensor(5.35e17, dtype=torch.float64).to(dtype)
    return out


def exact_figures(x: np.ndarray) -> dict[str, float]:
    """norm, mean and std (ddof=0) of the finite values, in exact rational arithmetic (a
    float64 two-pass reference rounds its mean, which is most of a std of one spacing)."""
    f = [Fraction(float(v)) for v in x[np.isfinite(x)]]
    n = len(f)
    mean = sum(f) / n
    square = sum(v * v for v in f)
    spread = sum((v - mean) ** 2 for v in f) / n
    top = max(abs(v) for v in f) or Fraction(1)  # square roots of scaled exact values
    return {"norm": float(top) * math.sqrt(square / (top * top)), "mean": float(mean),
            "std": float(top) * math.sqrt(spread / (top * top)), "min": float(min(f)),
            "max": float(max(f)), "abs_max": float(top) if any(f) else 0.0}


def numpy_edges(finite: np.ndarray, bins: int, lo: float, hi: float) -> np.ndarray | None:
    """``np.histogram``'s own edges for ``lo … hi``, or None where numpy refuses (or, with
    one bin and an overflowing width, makes a NaN edge)."""
    try:
        with np.errstate(all="ignore"):
            edges = np.histogram_bin_edges(finite, bins, range=(lo, hi))
    except ValueError:  # "Too many bins for data range. Cannot create N finite-sized bins."
        return None
    return edges if np.isfinite(edges).all() else None


def check_record(record, grads: dict[str, torch.Tensor], bins: int, hist_range) -> int:
    """Every parameter's figures and histogram against numpy; returns how many used the
    fallback rule (numpy could not build edges)."""
    fallbacks = 0
    for name, g in grads.items():
        stats, hist = record.params[f"ps.{name}"], record.histograms[f"ps.{name}"]
        x = g.detach().double().cpu().numpy().ravel()
        finite = x[np.isfinite(x)]
        edges = hist.edges
        inside = finite[(finite >= edges[0]) & (finite <= edges[-1])]
        assert np.array_equal(hist.counts, np.histogram(inside, bins=edges)[0]), (name, edges)
        assert hist.total == x.size and stats.nan_count == 0, name
        assert stats.inf_count == hist.inf_count == np.isinf(x).sum(), name
        if finite.size:
            for field, value in exact_figures(x).items():
                got = getattr(stats, field)
                assert math.isclose(got, value, rel_tol=1e-9, abs_tol=1e-300), (name, field, got, value)
        assert np.isfinite(edges).all() and (edges[1:] > edges[:-1]).all(), (name, edges)
        assert hist.below == hist.above == 0 or hist_range not in ("auto", "symmetric")
        if not finite.size:
            continue
        lo, hi = float(finite.min()), float(finite.max())
        if hist_range == "symmetric":
            lo, hi = -max(abs(lo), abs(hi)), max(abs(lo), abs(hi))
        expected = numpy_edges(finite, bins, lo, hi)
        if expected is not None:  # numpy's own edges, bit for bit
            assert np.array_equal(edges, expected), (name, edges, expected)
            continue
        fallbacks += 1
        rule = histogram_edges(np.array([lo]), np.array([hi]), bins)[0]  # the documented fallback
        assert np.array_equal(edges, rule) and np.array_equal(np.signbit(edges), np.signbit(rule)), name
        assert edges[0] <= lo and edges[-1] >= hi, (name, edges, lo, hi)
        if not math.isfinite(hi - lo):  # too wide: lo … hi exactly
            assert (edges[0], edges[-1]) == (lo, hi), name
    return fallbacks


def run_cases(backend: str, dtype: torch.dtype, bins: int, hist_range, device: str = "cpu") -> int:
    grads = {name: g.to(device) for name, g in degenerate_grads(dtype).items()}
    record = gradient_stats(Holder(grads), bins=bins, hist_range=hist_range, backend=backend)
    return check_record(record, grads, bins, hist_range)
