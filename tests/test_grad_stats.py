"""GradientMonitor: statistics and histograms agree with independent numpy computations."""

import math

import numpy as np
import pytest
import torch
from grad_helpers import make_session, mixed_workload, nan_workload

from gradexplorer.core.session.engine import SessionConfig, TrainingSession
from gradexplorer.core.stats.histogram import histogram_edges, sparkline
from gradexplorer.core.stats.monitor import GradientMonitor, gradient_stats

BACKENDS = ["numba", "torch"]


def reference(x: np.ndarray) -> dict:
    """Figures over the finite elements, computed independently in float64."""
    x = x.astype(np.float64).ravel()
    f = x[np.isfinite(x)]
    return {
        "norm": np.sqrt(np.sum(f * f)), "mean": f.mean(), "std": f.std(), "min": f.min(),
        "max": f.max(), "abs_max": np.abs(f).max(), "zero_fraction": np.mean(x == 0),
        "nan_count": int(np.isnan(x).sum()), "inf_count": int(np.isinf(x).sum()),
    }


def check_against_raw(record, model):
    for name, p in model.named_parameters():
        stats = record.params[name]
        if p.grad is None:
            assert not stats.has_grad and stats.norm is None and name not in record.histograms
            continue
        x = p.grad.detach().double().numpy().ravel()
        if not np.isfinite(x).any():
            continue  # no finite element: figures are NaN, checked by the caller
        for field, value in reference(x).items():
            assert getattr(stats, field) == pytest.approx(value, rel=1e-9, abs=1e-12), (name, field)
        hist = record.histograms[name]
        finite = x[np.isfinite(x)]
        assert np.array_equal(hist.counts, np.histogram(finite, bins=hist.edges)[0]), name
        assert hist.total == x.size and hist.counts.sum() == finite.size


@pytest.mark.parametrize("backend", BACKENDS)
def test_lenet_stats_and_histograms_match_raw_gradients(backend):
    session = make_session("example:lenet", momentum=0.9)
    monitor = GradientMonitor(backend=backend)
    session.add_observer(monitor)
    for _ in range(2):
        result = session.step()
    record = result.gradients
    assert record.step == 2 and record.total_numel == 61_706 and len(record.params) == 10
    check_against_raw(record, session.model)
    grads = torch.cat([p.grad.reshape(-1) for p in session.model.parameters()])
    assert record.global_norm == pytest.approx(float(grads.double().norm()), rel=1e-9)
    assert result.grad_norm == pytest.approx(record.global_norm, rel=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_big_small_and_unused_parameters(backend):
    session = TrainingSession(mixed_workload(), SessionConfig(device="cpu"))
    monitor = GradientMonitor(bins=17, backend=backend)
    session.add_observer(monitor)
    record = session.step().gradients
    assert session.model.big.weight.numel() >= 65_536
    assert not record.params["unused.weight"].has_grad
    assert record.params["unused.weight"].update_ratio is None
    assert record.total_numel == sum(
        p.numel() for n, p in session.model.named_parameters() if not n.startswith("unused"))
    assert all(len(h.counts) == 17 for h in record.histograms.values())
    check_against_raw(record, session.model)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("optimizer,momentum", [("sgd", 0.9), ("sgd", 0.0), ("adam", 0.0)])
def test_update_ratio_is_step_size_over_weight_norm(backend, optimizer, momentum):
    session = make_session("example:lenet", optimizer=optimizer, momentum=momentum)
    session.add_observer(GradientMonitor(backend=backend))
    session.step()
    before = {n: p.detach().clone() for n, p in session.model.named_parameters()}
    record = session.step().gradients
    for name, p in session.model.named_parameters():
        expected = float((p.detach() - before[name]).double().norm() / before[name].double().norm())
        assert record.params[name].update_ratio == pytest.approx(expected, rel=1e-4)
        assert expected > 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_nan_and_inf_are_counted_apart(backend):
    model = torch.nn.Linear(500, 200)  # 100,000 weights: the big-tensor kernels
    weight = torch.randn(200, 500)
    weight[0, :7] = float("nan")
    weight[1, :3] = float("inf")
    weight[2, :2] = -float("inf")
    weight[3, :5] = 0.0
    model.weight.grad = weight
    model.bias.grad = torch.full((200,), float("nan"))
    record = gradient_stats(model, bins=32, backend=backend)
    w = record.params["weight"]
    assert (w.nan_count, w.inf_count) == (7, 5)
    check_against_raw(record, model)
    b = record.params["bias"]
    assert b.nan_count == 200 and math.isnan(b.mean) and record.histograms["bias"].counts.sum() == 0
    assert math.isnan(record.global_norm)


def test_nan_model_keeps_running_with_counts():
    session = TrainingSession(nan_workload(), SessionConfig(device="cpu"))
    session.add_observer(GradientMonitor())
    records = [r.gradients for r in session.run(3)]
    assert records[0].params["p"].nan_count == 3
    assert records[0].params["fc.weight"].nan_count == 0
    assert records[-1].params["fc.weight"].nan_count == 8  # p went NaN: everything follows
    assert all(h.total == records[-1].params[n].numel for n, h in records[-1].histograms.items())


@pytest.mark.parametrize("backend", BACKENDS)
def test_fixed_and_symmetric_ranges(backend):
    model = torch.nn.Linear(10, 10)
    model.weight.grad = torch.linspace(-2, 3, 100).reshape(10, 10)
    model.bias.grad = torch.zeros(10)
    fixed = gradient_stats(model, bins=10, hist_range=(-1.0, 1.0), backend=backend)
    h = fixed.histograms["weight"]
    g = model.weight.grad.double().numpy().ravel()
    assert h.below == int((g < -1).sum()) and h.above == int((g > 1).sum()) and h.total == 100
    assert np.array_equal(h.counts, np.histogram(g, bins=h.edges)[0])
    sym = gradient_stats(model, bins=10, hist_range="symmetric", backend=backend)
    assert sym.histograms["weight"].edges[0] == -3.0 and sym.histograms["weight"].edges[-1] == 3.0
    zero = sym.histograms["bias"]  # all zeros: degenerate range widened like numpy does
    assert np.array_equal(zero.edges, np.histogram(np.zeros(10), bins=10)[1])
    assert zero.counts.sum() == 10 and sym.params["bias"].zero_fraction == 1.0


def test_histogram_cadence_and_bounded_history():
    session = make_session("example:lenet")
    monitor = GradientMonitor(histogram_every=2, history=3)
    session.add_observer(monitor)
    records = [r.gradients for r in session.run(5)]
    assert [bool(r.histograms) for r in records] == [False, True, False, True, False]
    assert all(len(r.params) == 10 for r in records)
    assert monitor.history.steps() == [3, 4, 5] and monitor.history.latest() is records[-1]
    steps, norms = monitor.history.series("fc1.weight", "norm")
    assert list(steps) == [3, 4, 5] and np.allclose(norms, [r.params["fc1.weight"].norm for r in records[2:]])
    matrix = monitor.history.histogram_matrix("fc1.weight")
    assert list(matrix.steps) == [4] and matrix.counts.shape == (1, 64)
    grid, image = matrix.on_common_grid()
    assert image.shape == (1, 64) and image.sum() == pytest.approx(120 * 400)
    assert 0 < monitor.history.memory_bytes() < 1_000_000


def test_float64_model():
    model = torch.nn.Linear(6, 4).double()
    model.weight.grad = torch.randn(4, 6, dtype=torch.float64) * 1e-30
    model.bias.grad = torch.randn(4, dtype=torch.float64)
    check_against_raw(gradient_stats(model), model)


def test_edges_match_linspace_and_sparkline():
    edges = histogram_edges(np.array([-1.5, 2.0]), np.array([0.25, 2.0]), 7)
    assert np.array_equal(edges[0], np.linspace(-1.5, 0.25, 8))
    assert np.array_equal(edges[1], np.linspace(1.5, 2.5, 8))
    assert sparkline(np.array([0, 1, 8, 4]), 4) == " ▁█▄"


def test_auto_backend_is_numba_on_cpu_and_torch_without_it(monkeypatch):
    from gradexplorer.core.stats.backends import registry as grad_stats

    session = make_session()
    monitor = GradientMonitor()
    session.add_observer(monitor)
    session.step()
    assert monitor.backend == "numba"
    monkeypatch.setattr(grad_stats, "numba_available", lambda: False)
    session = make_session()
    monitor = GradientMonitor()
    session.add_observer(monitor)
    record = session.step().gradients
    assert monitor.backend == "torch"
    check_against_raw(record, session.model)


@pytest.mark.parametrize("kwargs", [
    {"maximize": True}, {"weight_decay": 0.1}, {"momentum": 0.5, "nesterov": True},
    {"momentum": 0.5, "dampening": 0.3, "weight_decay": 0.01, "maximize": True},
])
def test_update_ratio_for_sgd_variants(kwargs):
    session = make_session("example:lenet")
    session.optimizer = torch.optim.SGD(session.model.parameters(), lr=0.05, **kwargs)
    session.add_observer(GradientMonitor())
    for _ in range(2):
        before = {n: p.detach().clone() for n, p in session.model.named_parameters()}
        record = session.step().gradients
        for name, p in session.model.named_parameters():
            step = (p.detach() - before[name]).double().norm()
            expected = float(step / before[name].double().norm())
            assert record.params[name].update_ratio == pytest.approx(expected, rel=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_narrow_range_far_from_zero_is_still_exact(backend):
    model = torch.nn.Linear(100, 1000, bias=False)  # 100,000 weights
    model.weight.grad = 1000 + torch.rand(1000, 100) * 0.002
    record = gradient_stats(model, bins=16, hist_range=(1000.0, 1000.001), backend=backend)
    h = record.histograms["weight"]
    g = model.weight.grad.double().numpy().ravel()
    inside = g[(g >= 1000.0) & (g <= 1000.001)]
    assert np.array_equal(h.counts, np.histogram(inside, bins=h.edges)[0])
    assert h.total == g.size and h.above == int((g > 1000.001).sum())
    auto = gradient_stats(model, bins=16, backend=backend).histograms["weight"]
    assert np.array_equal(auto.counts, np.histogram(g, bins=auto.edges)[0])


def test_sparse_embedding_gradient(tmp_path):
    from gradexplorer.core.snapshot import read_snapshot, write_snapshot

    emb = torch.nn.Embedding(50, 4, sparse=True)
    emb(torch.tensor([1, 2, 2])).sum().backward()
    record = gradient_stats(emb)
    dense = emb.weight.grad.to_dense().numpy()
    assert record.params["weight"].zero_fraction == pytest.approx(np.mean(dense == 0))
    assert record.params["weight"].norm == pytest.approx(np.linalg.norm(dense), rel=1e-6)

    class Holder:
        model, optimizer, step_count = emb, torch.optim.SGD(emb.parameters(), lr=0.1), 1
        device = "cpu"
        workload = type("W", (), {"name": "embedding", "description": ""})()

    snap = read_snapshot(write_snapshot(tmp_path, Holder()))
    assert np.array_equal(snap.gradients()["weight"].numpy(), dense)
