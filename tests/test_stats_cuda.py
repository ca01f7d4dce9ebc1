"""The fused statistics on a CUDA device (skipped without one): the Triton kernels and the eager
ops give the figures the CPU path gives, with exactly one host synchronisation per step (the
single transfer after the optimizer step). Run on a GPU machine with
``python -m pytest tests/test_stats_cuda.py -q``."""

import warnings

import numpy as np
import pytest
import torch
from degenerate_grads import DTYPES, run_cases

from gradexplorer.core.stats.backends.raw import DSQ, DSUM, NSQ
from gradexplorer.core.stats.backends.torch.grouped import FusedTorch
from gradexplorer.core.stats.backends.triton import stats as triton_stats

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

SUMS = [DSUM, DSQ, NSQ]


def gradients(device: str) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Gradients and weights of awkward sizes, dtypes and values (NaN, ±Inf, zeros, offsets)."""
    g = torch.Generator().manual_seed(0)
    grads = [torch.randn(300, 300, generator=g), torch.randn(7, generator=g) * 1e-30,
             1000 + torch.randn(5000, generator=g) * 1e-4, torch.zeros(33),
             (torch.randn(64, 40, generator=g) * 3).half(),
             (torch.randn(50, generator=g) * 1e-3).bfloat16(),
             torch.randn(90, generator=g, dtype=torch.float64) * 1e200]
    grads[0][0, :5], grads[0][1, :3], grads[0][2, :2] = float("nan"), float("inf"), -float("inf")
    weights = [torch.randn(t.shape, generator=g).to(t.dtype) for t in grads]
    return [t.to(device) for t in grads], [t.to(device) for t in weights]


def one_step(device: str, triton: bool, hist_range="auto"):
    """begin → an SGD-like in-place update → finish; the raw figures and the syncs counted."""
    grads, weights = gradients(device)
    fused = FusedTorch(triton=triton)
    fused.finish(fused.begin(grads, weights, True, 64, hist_range), weights)  # builds layouts
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode("warn")
        try:
            pending = fused.begin(grads, weights, True, 64, hist_range)
            with torch.no_grad():
                for w, gr in zip(weights, grads, strict=True):
                    w.sub_(0.01 * gr.nan_to_num(0.0, 0.0, 0.0))
            raw = fused.finish(pending, weights)
        finally:
            if device == "cuda":
                torch.cuda.set_sync_debug_mode(0)
    syncs = sum("synchroniz" in str(w.message) for w in seen)
    return raw, syncs


@pytest.mark.parametrize("hist_range", ["auto", "symmetric", (-0.5, 0.25)])
@pytest.mark.parametrize("triton", [True, False])
def test_cuda_figures_equal_the_cpu_path_with_one_sync(triton, hist_range):
    cpu, _ = one_step("cpu", False, hist_range)
    cuda, syncs = one_step("cuda", triton, hist_range)
    assert syncs == 1, syncs  # the single device-to-host transfer
    others = [c for c in range(cpu.moments.shape[1]) if c not in SUMS]
    assert np.array_equal(cpu.moments[:, others], cuda.moments[:, others], equal_nan=True)
    assert np.allclose(cpu.moments[:, SUMS], cuda.moments[:, SUMS], rtol=1e-12, atol=0,
                       equal_nan=True)
    assert np.array_equal(cpu.edges, cuda.edges, equal_nan=True)
    assert np.array_equal(cpu.counts, cuda.counts) and np.array_equal(cpu.extra, cuda.extra)
    assert np.allclose(cpu.update, cuda.update, rtol=1e-12, atol=0)


@pytest.mark.parametrize("triton", [True, False])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_degenerate_gradients_at_every_magnitude_on_cuda(dtype, triton, monkeypatch):
    """Constant, 1-element and two-valued gradients from ±5e-324 to ±max float
    (``degenerate_grads``) on the GPU, by the compiled Triton kernels and by the eager ops:
    numpy's histogram on the reported edges, numpy's edges where numpy can build them."""
    if not triton:
        monkeypatch.setattr(triton_stats, "usable", lambda *args, **kwargs: False)
    for bins in (1, 7, 64):
        for hist_range in ("auto", "symmetric"):
            run_cases("torch", dtype, bins, hist_range, device="cuda")
