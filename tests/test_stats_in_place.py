"""The in-place CPU passes (backend_at: tensors read by address) give the packed path's figures
bit for bit, and are taken exactly where they can read every tensor in place."""

import numpy as np
import pytest
import torch

from gradexplorer.core.stats.backends.numba import cpu as C
from gradexplorer.core.stats.backends.numba import in_place as A

SHAPES = [(256, 256), (256, 3), (1,), (0,), (70000,), (5,), (3, 3)]
EXPONENTS = (0, 3, -30, 0, 0, 0, 0)  # each tensor's magnitude, 10**e


def tensors(dtype):
    torch.manual_seed(0)
    ts = [torch.randn(s, dtype=dtype) * 10.0 ** e for s, e in zip(SHAPES, EXPONENTS, strict=True)]
    ts[1][0, 0] = float("nan")
    ts[5][2] = float("inf")
    ts[6].zero_()
    return ts


@pytest.fixture(params=[1, 2], ids=["one thread", "two threads"])
def threads(request, monkeypatch):
    """One thread (a single kernel call), or two with every size worth sharing out."""
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    if request.param > 1:
        monkeypatch.setattr(A, "PARALLEL_MIN", 1)
        monkeypatch.setattr(C, "PARALLEL_MIN", 1)
    yield request.param
    torch.set_num_threads(before)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("hist_range", ["auto", "symmetric", (-0.5, 0.5)])
def test_in_place_statistics_equal_the_packed_ones_bit_for_bit(dtype, hist_range, threads):
    ts = tensors(dtype)
    packed = C.compute(ts, True, 64, hist_range)
    in_place = A.compute_at(A.addresses_of(ts), True, 64, hist_range)
    for field in ("moments", "edges", "counts", "extra"):
        assert np.array_equal(getattr(packed, field), getattr(in_place, field), equal_nan=True), field


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_in_place_update_and_gradient_norms_equal_the_packed_ones(dtype, threads):
    ts = tensors(dtype)
    packed, in_place = C.ParamCopies(), A.UpdateCopies()
    packed.take(ts)
    in_place.take(ts)
    for t in ts:
        t.add_(0.01)
    assert np.array_equal(packed.update_norms(ts), in_place.update_norms(ts), equal_nan=True)
    one_by_one = [C.K.norm_of_array(C.flat_array(t)) for t in ts]
    assert np.array_equal(one_by_one, A.norms_at(A.addresses_of(ts)), equal_nan=True)


def test_in_place_only_where_every_tensor_can_be_read_so():
    plain = [torch.randn(4, 3), torch.randn(5)]
    at = A.addresses_of(plain)
    assert at is not None and at.sizes.tolist() == [12, 5]
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # shares balanced by size, every tensor in one
    try:
        parts = A.shares(A.addresses_of([torch.zeros(s) for s in (1 << 19, 10, 1 << 18, 1 << 18)]))
    finally:
        torch.set_num_threads(before)
    assert sorted(sorted(r.tolist()) for r in parts) == [[0, 1], [2, 3]]
    assert A.addresses_of([torch.randn(4, 3).t()]) is None  # not contiguous
    assert A.addresses_of([torch.randn(3), torch.randn(3, dtype=torch.float64)]) is None  # two dtypes
    assert A.addresses_of([torch.randn(3, dtype=torch.bfloat16)]) is None  # not a kernel dtype
    assert A.addresses_of([]) is None
    copies = A.UpdateCopies()  # weights it cannot read in place: the packed copies
    weights = [torch.randn(4, 3).t(), torch.randn(5)]
    copies.take(weights)
    weights[1].mul_(2)
    norms = copies.update_norms(weights)
    assert norms[0, 0] == 0 and norms[1, 0] == pytest.approx(float(weights[1].norm() / 2))


def test_a_watched_float32_model_takes_the_in_place_passes(monkeypatch):
    from gradexplorer.core.stats.backends.warmup import ready

    assert ready()  # the kernels warmed before the patch (GRADEXPLORER_KERNELS=wait): the warm
    # pass runs a monitor pass of its own, which must not meet the patched path (the test alone)

    def packed(*args, **kwargs):
        raise AssertionError("the packed path was taken")

    monkeypatch.setattr(C, "compute", packed)
    monkeypatch.setattr(C.ParamCopies, "take", packed)
    import gradexplorer as gx

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gx.watch(model, opt) as rec:
        model(torch.randn(4, 8)).sum().backward()
        grads = {n: p.grad.double().clone() for n, p in model.named_parameters()}
        opt.step()
    record = rec.latest()
    assert not record.not_recorded
    for name, g in grads.items():
        assert record.params[name].norm == pytest.approx(float(g.norm()), rel=1e-12)
        assert record.params[name].update_ratio > 0
        assert record.histograms[name].total == g.numel()


def moments_rows(mins, maxs, nans=0, infs=0):
    rows = np.zeros((len(mins), C.MOMENT_COLUMNS))
    rows[:, C.MIN], rows[:, C.MAX] = mins, maxs
    rows[:, C.NANS], rows[:, C.INFS] = nans, infs
    return rows


HUGE, SUB = np.finfo(np.float64).max, np.finfo(np.float64).smallest_subnormal


@pytest.mark.parametrize("hist_range", ["auto", "symmetric", (-0.5, 0.5), (-1e-30, 3e-30)])
@pytest.mark.parametrize("bins", [1, 7, 64])
def test_the_kernels_edges_equal_the_numpy_edges_bit_for_bit(hist_range, bins):
    rng = np.random.default_rng(0)
    lo = rng.standard_normal(200) * 10.0 ** rng.integers(-250, 250, 200)
    hi = lo + np.abs(lo) * 10.0 ** rng.uniform(-8, 3, 200)  # spans from 1e-8 to 1e3 of |lo|
    lo[100:] = -np.abs(lo[100:])  # straddling 0: spans of any size
    lo[:5], hi[:5] = [0.0, -0.0, 3.0, -2.5, 1e-3], [0.0, 0.0, 3.0, -2.5, 1e-3]  # constants, zeros
    lo[5:7], hi[5:7] = [np.inf, -2.0**-1000], [-np.inf, 2.0**-1000]  # none finite, tiny
    careful = (rng.random(200) < 0.1).astype(float)
    rows = moments_rows(lo, hi, nans=careful)
    expected = C.histogram_edges(*C.range_bounds(rows[:, C.MIN], rows[:, C.MAX], hist_range), bins)
    edges, flags = A.step_edges(rows, bins, hist_range)
    assert flags is not None  # every row above has finite, increasing edges
    assert np.array_equal(edges, expected) and np.array_equal(np.signbit(edges), np.signbit(expected))
    outside = (rows[:, C.MIN] < expected[:, 0]) | (rows[:, C.MAX] > expected[:, -1])
    assert np.array_equal(flags, (careful > 0) | outside)


@pytest.mark.parametrize("row", [(-HUGE, HUGE), (2.0**60, 2.0**60), (SUB, 2 * SUB)])
def test_ranges_numpy_cannot_split_take_the_fallback_edges(row):
    rows = moments_rows([0.5, row[0]], [1.0, row[1]])
    edges, flags = A.step_edges(rows, 64, "auto")
    expected = C.histogram_edges(*C.range_bounds(rows[:, C.MIN], rows[:, C.MAX], "auto"), 64)
    assert flags is None and np.array_equal(edges, expected)
    assert (np.diff(edges, axis=1) > 0).all()


def test_kept_addresses_are_read_again_when_a_weight_moves_or_changes():
    """The weights' addresses are kept from step to step (``KeptAddresses``) and read again
    whenever one of them is replaced, moved, resized or made non-contiguous; the update norms
    stay those of the weights as they are (``p.data = ...`` between the copy and the norms)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.Linear(4, 2))
    params = list(model.parameters())
    kept = A.KeptAddresses()
    first = kept.of(params)
    assert first is not None and kept.of(params) is first  # the same weights: not read again
    assert kept.of(list(params)) is first  # another list of the same weights
    params[0].data = params[0].data.clone()  # replaced: lies elsewhere
    moved = kept.of(params)
    assert moved is not first and moved.addresses[0] == params[0].data_ptr()
    params[1].data = params[1].data[:2]  # resized where it lies
    assert kept.of(params).sizes[1] == 2
    params[0].data = params[0].data.t()  # not contiguous (the same address): not in place
    assert kept.of(params) is None

    copies = A.UpdateCopies()
    weights = [p.detach() for p in model[1].parameters()]
    before = [w.clone() for w in weights]
    copies.take(weights)
    weights[0].add_(0.5)  # as an optimizer step
    model[1].weight.data = model[1].weight.data.clone()  # and elsewhere afterwards: a new tensor
    weights = [p.detach() for p in model[1].parameters()]
    norms = copies.update_norms(weights)
    expected = [(w.double() - b.double()).norm().item() for w, b in zip(weights, before, strict=True)]
    assert norms[:, 0].tolist() == pytest.approx(expected, rel=1e-12)
    assert norms[:, 1].tolist() == pytest.approx([b.double().norm().item() for b in before], rel=1e-12)


class _Wrapper(torch.Tensor):
    """A tensor subclass without storage of its own (as DTensor is): data_ptr() is 0."""

    @staticmethod
    def __new__(cls, inner):
        return torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype,
                                                   device=inner.device)

    def __init__(self, inner):
        self.inner = inner

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise NotImplementedError(func)


def test_a_tensor_without_storage_of_its_own_is_never_read_in_place():
    """A DTensor's gradient reached the kernels by its address, 0, and crashed the process."""
    from gradexplorer.core.stats.backends.numba.in_place import addresses_of

    wrapped = _Wrapper(torch.ones(3, 4))
    assert wrapped.data_ptr() == 0 and wrapped.is_contiguous()
    assert addresses_of([torch.ones(2), wrapped]) is None
    assert addresses_of([torch.ones(2), torch.ones(0)]) is not None  # empty: nothing to read
