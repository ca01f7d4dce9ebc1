"""Gradient statistics of one (device, dtype) group by two Triton kernels: two reads of the data.

The same figures as ``fused.moments`` + ``fused_bins.histograms`` (columns of ``raw``), from the
padded block layout ``blocks.load`` fills, with the eager whole-buffer passes replaced by two
kernels of one program per row (``triton.kernels``):

1. ``extremes``: finite min, finite max, zeros, NaN and non-finite (padding included) per row;
2. on the device, P-sized torch ops: rows reduced to tensors (``Blocks.reduce_rows`` /
   ``sum_rows``), the power-of-two scale (``fused.pow2_above``), the midrange shift, the
   histogram bounds and edges (``finite_bounds``, ``mode_bounds``, ``histogram_edges``);
3. ``sums_and_histogram``: Σd, Σd², Σa² in float64 and each row's histogram (privatised in the
   program by ``tl.histogram``, written as one ``(rows, bins + 4)`` row, summed per tensor).

Nothing reads a value back to the host, copies a host-built tensor in or makes a shape that
depends on the data: the single transfer per step stays the backend's job. Chosen by
``usable``: Triton importable and a CUDA device, or ``TRITON_INTERPRET=1`` (the tests run the
kernels on CPU tensors through Triton's interpreter).
"""

from __future__ import annotations

import functools
import os

import torch

from gradexplorer.core.stats.backends.torch import fused
from gradexplorer.core.stats.backends.torch.blocks import Blocks
from gradexplorer.core.stats.histogram import HistRange, finite_bounds, histogram_edges, mode_bounds

F64 = torch.float64
INF = float("inf")
MIN_CAPABILITY = (7, 0)  # the oldest NVIDIA GPUs Triton (and torch.compile) targets
MAX_BINS = 256  # tl.histogram over at most 512 slots per program (Triton tests 512)


@functools.cache
def _triton():
    """The ``triton`` module, or None where it does not import or lacks ``tl.histogram``."""
    try:
        import triton
        import triton.language as tl
    except Exception:  # absent, or an install that cannot load (e.g. a missing driver library)
        return None
    return triton if hasattr(tl, "histogram") else None  # Triton 3.0 on


def _interpret_set(triton=None) -> bool:
    """``TRITON_INTERPRET`` as Triton reads it (its knobs; the variable itself before 3.4 or
    before Triton is imported)."""
    knobs = getattr(triton, "knobs", None)
    if knobs is not None:
        return bool(knobs.runtime.interpret)
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on")


def interpreting() -> bool:
    """Whether kernels run in Triton's interpreter: ``TRITON_INTERPRET=1`` now *and* when
    Triton was imported (it builds its own library, ``tl.sum`` and the like, for one mode at
    import; set only later, the interpreter cannot run them)."""
    triton = _triton()
    if triton is None or not _interpret_set(triton):
        return False
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(triton.language.sum, InterpretedFunction)


@functools.cache
def _capable(index: int) -> bool:
    return torch.cuda.get_device_capability(index) >= MIN_CAPABILITY


def usable(device: torch.device | str, bins: int = 64) -> bool:
    """True where the kernels can run: Triton importable and a CUDA device it targets, or any
    device in Triton's interpreter (``interpreting``: how the tests run them on the CPU); at
    most ``MAX_BINS`` bins (more fall back to the eager fused path)."""
    device = torch.device(device)
    if bins > MAX_BINS or (device.type != "cuda" and not _interpret_set()):
        return False  # (decided without importing Triton)
    triton = _triton()
    if triton is None:
        return False
    if _interpret_set(triton):  # then only if Triton was imported under it
        return interpreting()
    return _capable(device.index if device.index is not None else torch.cuda.current_device())


@functools.cache
def kernels(interpret: bool):
    """Both kernels jitted for one mode (``triton.jit`` picks compile or interpret when it
    decorates, so each mode gets its own pair)."""
    del interpret  # the cache key: the mode in force when ``triton.jit`` runs below
    from gradexplorer.core.stats.backends.triton import kernels as triton_kernels  # imports triton.language

    jit = _triton().jit
    return jit(triton_kernels.extremes), jit(triton_kernels.sums_and_histogram)


def launch_options(block: int) -> dict:
    """Warps by row length; no FMA contraction (bits of the sums and bin tests stay IEEE)."""
    return {"num_warps": 4 if block >= 512 else 2 if block >= 256 else 1,
            "enable_fp_fusion": False}


def histogram_width(bins: int) -> int:
    """A power of two above ``bins + 4`` (``tl.histogram`` and ``tl.arange`` want one; the
    last slot, never reported, takes the values that are in no bin)."""
    return max(8, 1 << (bins + 4).bit_length())


def extremes_and_counts(grid: torch.Tensor, blocks: Blocks, extremes, options: dict):
    """Per tensor: finite min and max (float64, +Inf/-Inf where none), zeros, NaN and Inf
    counts (float64), by the first kernel and P-sized reductions."""
    low = torch.empty(blocks.rows, dtype=grid.dtype, device=grid.device)
    high = torch.empty_like(low)
    flags = torch.empty((blocks.rows, 3), dtype=torch.int64, device=grid.device)
    if blocks.rows:
        extremes[(blocks.rows,)](grid, low, high, flags, BLOCK=blocks.block, **options)
    lo = blocks.reduce_rows(low, "min", INF).to(F64)
    hi = blocks.reduce_rows(high, "max", -INF).to(F64)
    zeros, nans, infs = blocks.sum_rows(flags).to(F64).unbind(1)
    return lo, hi, zeros, nans, infs - blocks.pad_total  # padding is +Inf: not the tensor's


def moments_and_histograms(grid: torch.Tensor, blocks: Blocks, want_histograms: bool, bins: int,
                           hist_range: HistRange):
    """``(rows (P, MOMENT_COLUMNS) float64, edges (P, bins+1) float64 | None,
    counts (P, bins+4) int64 | None)`` exactly as ``fused.moments`` + ``fused_bins.histograms``.

    ``grid`` is ``blocks.load(tensors)``: ``(rows, block)``, +Inf padding, float32 or float64.
    Counts are the bins, then NaN, Inf, below, above; element ``v`` is in bin ``k`` iff
    ``edges[k] <= v < edges[k+1]`` (last bin closed), as ``np.histogram`` with those edges.
    """
    if grid.device.type == "cuda":  # Triton launches on the current device: make it grid's
        with torch.cuda.device(grid.device):
            return _moments_and_histograms(grid, blocks, want_histograms, bins, hist_range)
    return _moments_and_histograms(grid, blocks, want_histograms, bins, hist_range)


def _moments_and_histograms(grid, blocks, want_histograms, bins, hist_range):
    extremes, sums_and_histogram = kernels(interpreting())
    options = launch_options(blocks.block)
    lo, hi, zeros, nans, infs = extremes_and_counts(grid, blocks, extremes, options)
    lo0, hi0 = finite_bounds(lo, hi)  # as fused.moments: scale and shift from the finite extremes
    scale, inverse = fused.pow2_above(torch.maximum(lo0.abs(), hi0.abs()))
    shift = lo0 / 2 + hi0 / 2
    wide = grid.dtype == F64
    edges = counts = None
    first = last = unit = bin_scale = shift  # placeholders: read only for histograms
    per_row_counts = torch.empty((0,), dtype=torch.int64, device=grid.device)
    if want_histograms:
        edges = histogram_edges(*mode_bounds(lo0, hi0, hist_range), bins)
        first, last = edges[:, 0].contiguous(), edges[:, -1].contiguous()
        unit = fused.inverse_pow2_above(torch.maximum(first.abs(), last.abs()))
        bin_scale = bins / (last * unit - first * unit)  # (as fused_bins.position_terms)
        per_row_counts = torch.empty((blocks.rows, bins + 4), dtype=torch.int64,
                                     device=grid.device)
    table = shift if edges is None else edges
    sums = torch.empty((blocks.rows, 3), dtype=F64, device=grid.device)
    if blocks.rows:
        sums_and_histogram[(blocks.rows,)](
            grid, blocks.segment, shift, inverse, shift * inverse, sums, table, first, last,
            unit, bin_scale, per_row_counts, BLOCK=blocks.block, WIDE=wide,
            HISTOGRAM=want_histograms, BINS=bins, WIDTH=histogram_width(bins), **options)
    dsum, dsq, nsq = blocks.sum_rows(sums).unbind(1)
    if not wide:  # power-of-two scaling of the sums: the same figures, bit for bit
        dsum, dsq, nsq = dsum * inverse, dsq * inverse.square(), nsq * inverse.square()
    finite = blocks.lengths - nans - infs
    rows = torch.stack([lo, hi, zeros, nans, infs, finite, dsum, dsq, nsq, scale, shift], 1)
    if want_histograms:
        counts = blocks.sum_rows(per_row_counts)
        counts[:, bins: bins + 2] = torch.stack([nans, infs], 1).long()
    return rows, edges, counts
