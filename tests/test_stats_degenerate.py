"""Degenerate gradients at every magnitude (``degenerate_grads``): the Numba and fused torch
paths give numpy's histogram on their own edges, and never raise (issue 19, item 5).

A constant gradient with |g| >= 2**53 once raised ZeroDivisionError (Numba) or IndexError
(torch) out of ``optimizer.step()``: numpy's ±0.5 widening of an empty range does nothing there.
The Triton kernels run the same cases in ``stats_triton_checks``.
"""

import numpy as np
import pytest
import torch
from degenerate_grads import DTYPES, degenerate_grads, numpy_edges, run_cases
from test_stats_op_count import OpCounter

import gradexplorer as gx
from gradexplorer.core.stats.histogram import histogram_edges


@pytest.mark.parametrize("hist_range", ["auto", "symmetric"])
@pytest.mark.parametrize("bins", [1, 7, 64])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_every_magnitude_equals_numpy_on_its_edges(backend, dtype, bins, hist_range):
    fallbacks = run_cases(backend, dtype, bins, hist_range)
    if dtype == torch.float64 or (dtype == torch.float32 and hist_range == "auto"):
        assert fallbacks > 0  # cases numpy refuses were reached (2**53 constants, ±max float)


def test_the_fallback_rule_is_the_same_in_numpy_and_torch():
    finite = [g[g.isfinite()] for g in degenerate_grads(torch.float64).values()]
    lo = np.array([float(g.min()) for g in finite])
    hi = np.array([float(g.max()) for g in finite])
    for bins in (1, 2, 64, 4096):
        edges = histogram_edges(lo, hi, bins)
        assert np.array_equal(edges, histogram_edges(torch.tensor(lo), torch.tensor(hi), bins).numpy())
        assert np.isfinite(edges).all() and (edges[:, 1:] > edges[:, :-1]).all()
        assert (edges[:, 0] <= lo).all() and (edges[:, -1] >= hi).all()


def test_a_bound_known_beforehand_leaves_out_ops_not_edges():
    """``histogram_edges``' bound (the largest float32 for ranges of float32 values, the fused
    path's case) decides the fallback's too-wide case and clamps per range on the host: fewer
    ops on the device, the edges of the rule without it bit for bit, fallback rows included."""
    finite = [g[g.isfinite()].double() for g in degenerate_grads(torch.float32).values()]
    finite = [g for g in finite if g.numel()]
    lo, hi = torch.stack([g.min() for g in finite]), torch.stack([g.max() for g in finite])
    bound = float(torch.finfo(torch.float32).max)
    for bins in (1, 7, 64, 4096):
        expected = histogram_edges(lo.numpy(), hi.numpy(), bins)
        refused = [numpy_edges(g.numpy(), bins, float(g.min()), float(g.max())) is None for g in finite]
        assert any(refused)  # rows of the fallback rule are among them
        with OpCounter() as bounded:
            edges = histogram_edges(lo, hi, bins, bound)
        with OpCounter() as unbounded:
            histogram_edges(lo, hi, bins)
        assert edges.numpy().tobytes() == expected.tobytes()
        assert sum(bounded.ops.values()) < sum(unbounded.ops.values())


def test_a_scalar_with_gradient_5_35e17_trains_through_watch(tmp_path):
    """The issue's case: a scalar temperature whose gradient hits 5.35e17 on one bad batch
    trains on, and the step is recorded exactly (figures and histogram)."""
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    model.temperature = torch.nn.Parameter(torch.tensor(1.0))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-20)
    with gx.watch(model, optimizer, tmp_path / "run") as rec:
        for step in range(3):
            optimizer.zero_grad()
            scale = 5.35e17 if step == 1 else 1.0
            loss = model(torch.randn(4, 3)).sum() + model.temperature * scale
            loss.backward()
            optimizer.step()
            assert rec.latest().step == step + 1
    g = np.float64(np.float32(5.35e17))  # the float32 gradient
    run = gx.open_run(tmp_path / "run")
    assert run.steps == [1, 2, 3]
    figures = run.figures(2)["temperature"]
    assert figures["norm"] == figures["max"] == figures["min"] == figures["mean"] == g
    assert figures["std"] == 0.0
    edges, counts = run.histogram(2, "temperature")
    assert counts.sum() == 1 and np.array_equal(counts, np.histogram([g], bins=edges)[0])
    assert edges[0] < g < edges[-1]
