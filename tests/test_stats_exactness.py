"""Fused torch path == Numba path == independent float64 numpy, at every magnitude and precision."""

import math

import numpy as np
import pytest
import torch
from grad_helpers import make_session
from stats_reference import Holder, assert_matches, monitored_step
from torch import nn

from gradexplorer.session import GradientMonitor, gradient_stats

BACKENDS = ["numba", "torch"]


def special_grads() -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    big = torch.randn(300, 300)
    big[0, :7], big[1, :3], big[2, :2] = float("nan"), float("inf"), -float("inf")
    return {
        "mixed": big,
        "zeros": torch.zeros(5, 4),
        "constant": torch.full((70_000,), 0.3),
        "single": torch.tensor([-2.5]),
        "scalar": torch.tensor(4.0),
        "far_from_zero": 1000 + torch.randn(100_000) * 1e-4,  # |mean| >> std in float32
        "all_nan": torch.full((9,), float("nan")),
        "fp16": torch.randn(50, 30).half() * 3,
        "bf16": torch.randn(40, 25).bfloat16() * 1e-3,
        "huge64": torch.randn(1000, dtype=torch.float64) * 1e200,
        "tiny64": torch.randn(64, dtype=torch.float64) * 1e-300,
        "empty": torch.zeros(0, 3),
    }


@pytest.mark.parametrize("histograms", [True, False])
@pytest.mark.parametrize("backend", BACKENDS)
def test_special_gradients_equal_float64_reference(backend, histograms):
    """With histograms the fused path takes its NaN/±Inf/padding count from them; without,
    it counts them itself: the figures are the same."""
    grads = special_grads()
    model = Holder(grads)
    record = gradient_stats(model, bins=32, backend=backend, histograms=histograms)
    for name, g in grads.items():
        stats = record.params[f"ps.{name}"]
        assert_matches(stats, record.histograms.get(f"ps.{name}"), g)
    p = record.params
    assert p["ps.constant"].std == 0.0 and p["ps.single"].std == 0.0
    assert p["ps.constant"].mean == pytest.approx(float(torch.tensor(0.3)), rel=0, abs=0)
    assert p["ps.zeros"].std == 0.0 and p["ps.zeros"].norm == 0.0
    assert math.isfinite(p["ps.huge64"].norm) and p["ps.huge64"].norm > 1e201
    assert math.isnan(p["ps.all_nan"].mean) and p["ps.all_nan"].nan_count == 9
    assert (p["ps.mixed"].nan_count, p["ps.mixed"].inf_count) == (7, 5)


@pytest.mark.parametrize("hist_range", [(-0.5, 0.25), (1000.0, 1000.0002), "symmetric"])
def test_fused_histograms_equal_numpy_with_fixed_and_symmetric_ranges(hist_range):
    """Out-of-range values, NaN/Inf, padding and every dtype: counts equal ``np.histogram``."""
    grads = special_grads()
    record = gradient_stats(Holder(grads), bins=16, hist_range=hist_range, backend="torch")
    for name, g in grads.items():
        hist = record.histograms[f"ps.{name}"]
        x = g.detach().double().numpy().ravel()
        finite = x[np.isfinite(x)]
        lo, hi = hist.edges[0], hist.edges[-1]
        inside = finite[(finite >= lo) & (finite <= hi)]
        assert np.array_equal(hist.counts, np.histogram(inside, bins=hist.edges)[0]), name
        assert (hist.below, hist.above) == ((finite < lo).sum(), (finite > hi).sum()), name
        assert (hist.nan_count, hist.inf_count) == (np.isnan(x).sum(), np.isinf(x).sum()), name
        assert hist.total == x.size, name


@pytest.mark.parametrize("backend", BACKENDS)
def test_far_from_zero_std_is_exact(backend):
    """1000 + N(0, 1e-4) in float32: √(E[x²] − mean²) was 63% off; now equals float64."""
    model = Holder({"w": 1000 + torch.randn(50_000, generator=torch.Generator().manual_seed(1)) * 1e-4})
    std = gradient_stats(model, backend=backend).params["ps.w"].std
    expected = model.ps["w"].grad.double().numpy().std()
    assert std == pytest.approx(expected, rel=1e-12)


def test_backends_agree_on_lenet_and_transformer():
    for spec in ("example:lenet", "example:transformer"):
        session = make_session(spec, optimizer="adam")
        monitors = [GradientMonitor(backend=b) for b in BACKENDS]
        for m in monitors:
            session.add_observer(m)
        session.step()
        result = session.step()
        numba, fused = (m.latest() for m in monitors)
        assert result.gradients in (numba, fused)
        for name, p in session.model.named_parameters():
            if p.grad is None:
                continue
            for record in (numba, fused):
                assert_matches(record.params[name], record.histograms[name], p.grad)
            a, b = numba.params[name], fused.params[name]
            for field in ("norm", "mean", "std", "min", "max", "zero_fraction", "update_ratio"):
                floor = 1e-14 * a.abs_max if field == "mean" else 1e-300
                assert getattr(a, field) == pytest.approx(getattr(b, field), rel=1e-12,
                                                          abs=floor), (spec, name, field)
            assert np.array_equal(numba.histograms[name].counts, fused.histograms[name].counts)
            assert np.array_equal(numba.histograms[name].edges, fused.histograms[name].edges)


class Many(nn.Module):
    """``count`` small parameters of assorted shapes (a 600-parameter model)."""

    def __init__(self, count: int) -> None:
        super().__init__()
        shapes = [(3,), (2, 5), (4, 1, 3), (7,)]
        self.ps = nn.ParameterList(nn.Parameter(torch.randn(shapes[i % 4])) for i in range(count))


def test_six_hundred_parameters_agree():
    torch.manual_seed(2)
    model = Many(600)
    for p in model.ps:
        p.grad = torch.randn_like(p)
    model.ps[5].grad[0] = float("nan")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    numba, fused = monitored_step(model, optimizer, [GradientMonitor(backend=b) for b in BACKENDS])
    assert len(fused.params) == 600
    for name, p in model.named_parameters():
        assert_matches(fused.params[name], fused.histograms[name], p.grad)
        assert np.array_equal(numba.histograms[name].counts, fused.histograms[name].counts)
        assert fused.params[name].std == pytest.approx(numba.params[name].std, rel=1e-12)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("opt", ["sgd", "adam"])
def test_low_precision_weights_report_the_measured_update(dtype, opt):
    """Updates that round away in bf16/fp16 report exactly 0; others the real ‖Δθ‖/‖θ‖."""
    torch.manual_seed(3)
    model = nn.ParameterDict({
        "stuck": nn.Parameter(torch.ones(300, dtype=dtype)),  # lr·g far below half an ulp of 1
        "moving": nn.Parameter(torch.randn(300).to(dtype)),
    })
    make = {"sgd": lambda ps: torch.optim.SGD(ps, lr=1e-6),
            "adam": lambda ps: torch.optim.Adam(ps, lr=1e-6, eps=1e-4)}[opt]  # fp16-safe eps
    optimizer = make([{"params": [model["stuck"]]},
                      {"params": [model["moving"]], "lr": 0.5}])
    for p in model.values():
        p.grad = torch.randn(p.shape).to(dtype)
    before = {n: p.detach().clone() for n, p in model.items()}
    records = monitored_step(model, optimizer, [GradientMonitor(backend=b) for b in BACKENDS])
    for n, p in model.items():
        moved = (p.detach().double() - before[n].double()).norm() / before[n].double().norm()
        for record in records:
            assert record.params[n].update_ratio == pytest.approx(float(moved), rel=1e-12)
    assert torch.equal(model["stuck"], before["stuck"])
    assert all(r.params["stuck"].update_ratio == 0.0 for r in records)
    assert all(r.params["moving"].update_ratio > 0.0 for r in records)


def test_huge_float64_weights_update_ratio_does_not_overflow():
    model = nn.Linear(20, 20).double()
    with torch.no_grad():
        model.weight.mul_(1e200)
    model.weight.grad = torch.randn(20, 20, dtype=torch.float64) * 1e200
    model.bias.grad = torch.randn(20, dtype=torch.float64)
    before = model.weight.detach().clone()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    records = monitored_step(model, optimizer, [GradientMonitor(backend=b) for b in BACKENDS])
    expected = float(((model.weight.detach() - before) / 1e200).norm() / (before / 1e200).norm())
    for record in records:
        assert record.params["weight"].update_ratio == pytest.approx(expected, rel=1e-12)
        assert math.isfinite(record.global_norm)


def test_mixed_dtypes_form_separate_groups():
    grads = {"a": torch.randn(10), "b": torch.randn(7, dtype=torch.float64),
             "c": torch.randn(12).bfloat16(), "d": torch.randn(3)}
    model = Holder(grads)
    record = gradient_stats(model, backend="torch")
    for name, g in grads.items():
        assert_matches(record.params[f"ps.{name}"], record.histograms[f"ps.{name}"], g)
    assert list(record.params) == [f"ps.{n}" for n in grads]


def values_around_edges(lo: float, hi: float, bins: int, dtype: np.dtype) -> np.ndarray:
    """Every value of ``dtype`` at or next to each bin edge of [lo, hi] (lo and hi included)."""
    from gradexplorer.core.stats.histogram import histogram_edges

    edges = histogram_edges(np.array([lo]), np.array([hi]), bins)[0]
    near = edges.astype(dtype)
    out = [near, np.nextafter(near, dtype.type(np.inf)), np.nextafter(near, dtype.type(-np.inf))]
    values = np.concatenate(out)
    return np.clip(values, dtype.type(lo), dtype.type(hi))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_bins_are_exact_at_every_edge(dtype):
    """Values on, just below and just above every edge, tiny and huge ranges, constant rows and
    an explicit range float32 cannot follow: counts equal ``np.histogram`` with the edges."""
    dtype = np.dtype(dtype)
    top = np.finfo(dtype).max
    tiny = np.finfo(dtype).smallest_subnormal
    cases = {
        "unit": values_around_edges(-1.3, 2.7, 64, dtype),
        "offset": values_around_edges(1000.0, 1000.001, 64, dtype),
        "denormal": values_around_edges(float(tiny), float(tiny) * 900, 64, dtype),
        "huge": values_around_edges(-float(top) / 2, float(top) / 3, 64, dtype),
        "constant_big": np.full(33, 3.0e7, dtype),
    }
    grads = {n: torch.from_numpy(np.random.default_rng(1).permutation(v)) for n, v in cases.items()}
    for hist_range in ("auto", "symmetric", (-1e250 if dtype == np.float64 else -1e30, 3e30)):
        record = gradient_stats(Holder(grads), bins=64, hist_range=hist_range, backend="torch")
        for name, g in grads.items():
            hist = record.histograms[f"ps.{name}"]
            x = g.double().numpy()
            inside = x[(x >= hist.edges[0]) & (x <= hist.edges[-1])]
            expected = np.histogram(inside, bins=hist.edges)[0]
            assert np.array_equal(hist.counts, expected), (name, hist_range)
            assert (hist.below, hist.above) == ((x < hist.edges[0]).sum(),
                                                (x > hist.edges[-1]).sum()), (name, hist_range)


def test_a_device_without_float64_is_computed_on_host_copies(monkeypatch):
    """MPS has no float64: its gradients and weights go to the host in one copy per group and
    give the very figures the device path gives elsewhere."""
    from gradexplorer.core.stats.backends.torch import grouped as backend_torch

    def step():
        torch.manual_seed(3)
        model = nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 2))
        model(torch.randn(7, 6)).square().sum().backward()
        monitor = GradientMonitor(backend="torch")
        return monitored_step(model, torch.optim.SGD(model.parameters(), lr=0.1), [monitor])[0]

    expected = step()
    asked = []
    monkeypatch.setattr(backend_torch, "lacks_float64", lambda device: asked.append(device) or 1)
    got = step()
    assert len(asked) == 3  # gradients, weights before and after the step: one group each
    for name, stats in expected.params.items():
        assert stats == got.params[name]
        assert np.array_equal(expected.histograms[name].counts, got.histograms[name].counts)
