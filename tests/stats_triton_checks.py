"""The Triton kernels (``core/stats/backends/triton/stats.py``) == the eager fused path == float64 numpy.

Run by ``tests/test_stats_triton.py`` in a subprocess started with ``TRITON_INTERPRET=1``:
Triton builds its own library (``tl.sum``, ``tl.min``, ...) for one mode when it is imported,
so its interpreter only works in a process where the variable was set before ``import triton``
(and setting it in the suite's process would send every other test's fused path through the
interpreter). By hand: ``TRITON_INTERPRET=1 python -m pytest tests/stats_triton_checks.py``.
Sizes are small: the interpreter runs one program (one row of the block layout) at a time.
"""

import os

import numpy as np
import pytest
import torch
from degenerate_grads import DTYPES, degenerate_grads, run_cases
from grad_helpers import make_session
from stats_reference import Holder, assert_matches, monitored_step

pytest.importorskip("triton", minversion="3.0")
if os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("needs TRITON_INTERPRET=1 before triton is imported (tests/test_stats_triton.py)",
                allow_module_level=True)

from gradexplorer.core.stats.backends import raw as C  # noqa: E402
from gradexplorer.core.stats.backends.torch import fused, fused_bins  # noqa: E402
from gradexplorer.core.stats.backends.torch.grouped import FusedTorch  # noqa: E402
from gradexplorer.core.stats.backends.triton import stats as triton_stats  # noqa: E402
from gradexplorer.session import GradientMonitor, gradient_stats  # noqa: E402

EXACT = [C.MIN, C.MAX, C.ZEROS, C.NANS, C.INFS, C.FINITE, C.SCALE, C.SHIFT]
SQUARES = [C.DSQ, C.NSQ]
RANGES = ["auto", "symmetric", (-0.5, 0.25), (1000.0, 1000.0002)]


@pytest.fixture
def interpret():
    assert triton_stats.interpreting() and triton_stats.usable("cpu")


@pytest.fixture
def calls(interpret, monkeypatch):
    """The dtype of each group the backend sent through the kernels."""
    seen = []
    real = triton_stats.moments_and_histograms

    def spy(*args, **kwargs):
        seen.append(args[0].dtype)
        return real(*args, **kwargs)

    monkeypatch.setattr(triton_stats, "moments_and_histograms", spy)
    return seen


def special_grads() -> dict[str, torch.Tensor]:
    """Every awkward case, small (the interpreter is slow)."""
    g = torch.Generator().manual_seed(0)
    mixed = torch.randn(60, 50, generator=g)
    mixed[0, :7], mixed[1, :3], mixed[2, :2] = float("nan"), float("inf"), -float("inf")
    mixed[3, :5] = 0.0
    return {
        "mixed": mixed,
        "zeros": torch.zeros(5, 4),
        "constant": torch.full((3000,), 0.3),
        "single": torch.tensor([-2.5]),
        "scalar": torch.tensor(4.0),
        "far_from_zero": 1000 + torch.randn(2000, generator=g) * 1e-4,  # |mean| >> std
        "all_nan": torch.full((9,), float("nan")),
        "outside": torch.linspace(-3, 3, 700),  # below and above the fixed ranges
        "fp16": (torch.randn(50, 30, generator=g) * 3).half(),
        "bf16": (torch.randn(40, 25, generator=g) * 1e-3).bfloat16(),
        "huge64": torch.randn(1000, dtype=torch.float64, generator=g) * 1e200,
        "tiny64": torch.randn(64, dtype=torch.float64, generator=g) * 1e-300,
        "plain64": torch.randn(300, dtype=torch.float64, generator=g),
        "empty": torch.zeros(0, 3),
    }


def by_dtype(grads: dict[str, torch.Tensor]) -> list[list[torch.Tensor]]:
    groups: dict[torch.dtype, list[torch.Tensor]] = {}
    for g in grads.values():
        groups.setdefault(g.dtype, []).append(g)
    return list(groups.values())


def both_paths(tensors: list[torch.Tensor], want: bool, bins: int, hist_range):
    """(rows, edges, counts) by the kernels and by the fused path, on one block layout."""
    blocks = FusedTorch().blocks(tensors, "grad")
    ours = triton_stats.moments_and_histograms(blocks.load(tensors), blocks, want, bins,
                                               hist_range)
    counted = want and hist_range in ("auto", "symmetric")  # as FusedTorch.begin
    rows, prepared = fused.moments(blocks.load(tensors), blocks, not counted)
    theirs = (rows, *fused_bins.histograms(prepared, blocks, rows, bins, hist_range)) if want \
        else (rows, None, None)
    return ours, theirs


def assert_same(ours, theirs) -> None:
    (rows, edges, counts), (f_rows, f_edges, f_counts) = ours, theirs
    assert rows.dtype == torch.float64 and rows.shape == f_rows.shape
    assert torch.equal(rows[:, EXACT], f_rows[:, EXACT])  # comparisons and counts: exact
    # sums: to float64 rounding (the summation order is the kernel's). Σd cancels: its error
    # is relative to n (every |d| <= 1 in the scaled units), the sums of squares to themselves
    n = f_rows[:, C.FINITE]
    assert torch.all((rows[:, C.DSUM] - f_rows[:, C.DSUM]).abs() <= 1e-14 * n)
    assert torch.allclose(rows[:, SQUARES], f_rows[:, SQUARES], rtol=1e-12, atol=0)
    if f_edges is None:
        assert edges is None and counts is None
        return
    assert edges.dtype == torch.float64 and counts.dtype == torch.int64
    assert torch.equal(edges, f_edges) and torch.equal(counts, f_counts)


@pytest.mark.parametrize("hist_range", RANGES)
def test_kernels_equal_the_fused_path_for_every_dtype(interpret, hist_range):
    """float32, float16/bfloat16 (widened), float64 at 1e±200/300: the same rows, edges and
    counts (bins, NaN, Inf, below, above) as fused.moments + fused_bins.histograms."""
    for tensors in by_dtype(special_grads()):
        assert_same(*both_paths(tensors, True, 16, hist_range))


def test_moments_alone_and_a_group_of_empty_tensors(interpret):
    tensors = by_dtype(special_grads())[0]
    assert_same(*both_paths(tensors, False, 16, "auto"))
    assert_same(*both_paths([torch.zeros(0), torch.zeros(2, 0)], True, 8, "auto"))


@pytest.mark.parametrize("bins", [1, 5, 64, 256])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_values_on_and_beside_every_edge(interpret, bins, dtype):
    """Each edge, and the next representable value on either side of it: the bin equals
    ``np.histogram`` with the reported edges (last bin closed), below/above counted apart."""
    lo, hi = -1.0, 0.7
    edges = np.linspace(lo, hi, bins + 1).astype(np.dtype(str(dtype).split(".")[1]))
    x = np.concatenate([edges, np.nextafter(edges, -np.inf), np.nextafter(edges, np.inf)])
    v = x.astype(np.float64)
    grad = torch.from_numpy(x)
    for hist_range in ("auto", (lo, hi)):
        ours, theirs = both_paths([grad], True, bins, hist_range)
        assert_same(ours, theirs)
        e, counts = ours[1][0].numpy(), ours[2][0].numpy()
        inside = v[(v >= e[0]) & (v <= e[-1])]
        assert np.array_equal(counts[:bins], np.histogram(inside, bins=e)[0])
        assert (counts[bins + 2], counts[bins + 3]) == ((v < e[0]).sum(), (v > e[-1]).sum())


@pytest.mark.parametrize("hist_range", ["auto", (-0.5, 0.25)])
def test_gradient_stats_through_the_kernels_equal_float64_numpy(calls, hist_range):
    grads = special_grads()
    record = gradient_stats(Holder(grads), bins=16, hist_range=hist_range, backend="torch")
    assert calls == [torch.float32, torch.float32, torch.float32, torch.float64]  # 16 widened
    for name, g in grads.items():
        stats, hist = record.params[f"ps.{name}"], record.histograms[f"ps.{name}"]
        assert_matches(stats, hist, g)
        x = g.detach().double().numpy().ravel()
        finite = x[np.isfinite(x)]
        assert (hist.below, hist.above) == ((finite < hist.edges[0]).sum(),
                                            (finite > hist.edges[-1]).sum()), name
        assert (hist.nan_count, hist.inf_count) == (np.isnan(x).sum(), np.isinf(x).sum()), name


def test_lenet_step_through_the_kernels_equals_numba(calls):
    """A real model's gradients: the kernels and the Numba path give the same counts and edges
    and the same figures to float64 rounding, both equal to float64 numpy."""
    session = make_session("example:lenet")
    session.step()
    monitors = [GradientMonitor(backend=b) for b in ("numba", "torch")]
    numba, ours = monitored_step(session.model, session.optimizer, monitors)
    assert calls == [torch.float32]
    for name, p in session.model.named_parameters():
        assert_matches(ours.params[name], ours.histograms[name], p.grad)
        assert np.array_equal(numba.histograms[name].counts, ours.histograms[name].counts)
        assert np.array_equal(numba.histograms[name].edges, ours.histograms[name].edges)
        a, b = numba.params[name], ours.params[name]
        for field in ("norm", "mean", "std", "min", "max", "zero_fraction", "update_ratio"):
            floor = 1e-14 * a.abs_max if field == "mean" else 1e-300
            assert getattr(b, field) == pytest.approx(getattr(a, field), rel=1e-12, abs=floor)


def test_chosen_only_where_it_can_run(interpret):
    assert triton_stats.usable("cpu", triton_stats.MAX_BINS)
    assert not triton_stats.usable("cpu", triton_stats.MAX_BINS + 1)  # the eager path above


def test_the_eager_ops_when_the_kernels_are_turned_off(calls):
    grads = [torch.randn(40), torch.randn(3, 5)]
    eager = FusedTorch(triton=False)
    raw_eager = eager.finish(eager.begin(grads, None, True, 16, "auto"), None)
    assert calls == []
    kernels = FusedTorch()
    raw = kernels.finish(kernels.begin(grads, None, True, 16, "auto"), None)
    assert calls == [torch.float32]
    assert np.array_equal(raw.counts, raw_eager.counts) and np.array_equal(raw.edges, raw_eager.edges)
    assert np.allclose(raw.moments, raw_eager.moments, rtol=1e-12, atol=1e-15)


def test_a_kernel_build_failure_falls_back_to_the_eager_path_once(interpret, monkeypatch):
    tries = []

    def broken(*args):
        tries.append(1)
        raise RuntimeError("Failed to find C compiler. Please specify via CC environment variable")

    monkeypatch.setattr(triton_stats, "moments_and_histograms", broken)
    grads = [torch.randn(40), torch.randn(3, 5)]
    engine = FusedTorch()
    with pytest.warns(RuntimeWarning, match="C compiler.*eager fused path"):
        raw = engine.finish(engine.begin(grads, None, True, 16, "auto"), None)
    eager = FusedTorch(triton=False)
    expected = eager.finish(eager.begin(grads, None, True, 16, "auto"), None)
    assert np.array_equal(raw.counts, expected.counts) and np.array_equal(raw.moments,
                                                                          expected.moments)
    engine.finish(engine.begin(grads, None, True, 16, "auto"), None)
    assert tries == [1] and not engine.triton  # not tried again


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_degenerate_gradients_at_every_magnitude(calls, dtype):
    """Constant, 1-element and two-valued gradients from ±5e-324 to ±max float
    (``degenerate_grads``): numpy's histogram on the reported edges, the same edges and
    counts as the eager fused path (7 bins here; the in-process test runs 1, 7 and 64 on the
    other paths: the interpreter runs one program at a time)."""
    bins = 7
    for hist_range in ("auto", "symmetric"):
        run_cases("torch", dtype, bins, hist_range)
        tensors = list(degenerate_grads(dtype).values())
        assert_same(*both_paths(tensors, True, bins, hist_range))
    assert calls and set(calls) == {torch.float64 if dtype == torch.float64 else torch.float32}
