"""One ddof (0) everywhere, and one norm with NaN/Inf (finite-only, counts apart) everywhere."""

import numpy as np
import pytest
import torch

from gradexplorer import compare_snapshots, read_snapshot
from gradexplorer.core.hooks.grad_summary import as_floats, summarize_tuple
from gradexplorer.runs import write_snapshot
from gradexplorer.session import gradient_stats


def test_observe_hook_std_is_the_statistics_std():
    torch.manual_seed(0)
    model = torch.nn.Linear(6, 5)
    model.weight.grad = torch.randn(5, 6)
    model.bias.grad = torch.tensor([0.5, -1.0, 2.0, 0.25, 3.0])
    stats = gradient_stats(model)
    seen = as_floats(summarize_tuple((model.weight.grad, model.bias.grad, torch.tensor([7.0]))))
    for summary, name in zip(seen, ("weight", "bias"), strict=False):
        grad = getattr(model, name).grad.double().numpy()
        assert summary["std"] == pytest.approx(np.std(grad, ddof=0), rel=1e-6)
        assert summary["std"] == pytest.approx(stats.params[name].std, rel=1e-6)
    assert seen[2]["std"] == 0.0  # one element: ddof=0 gives 0, not NaN


class Holder:
    def __init__(self, model, step):
        self.model, self.step_count, self.device = model, step, "cpu"
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        self.workload = type("W", (), {"name": "nan", "description": ""})()


def test_compare_and_inspect_agree_on_norms_with_nan_and_inf(tmp_path):
    model = torch.nn.Linear(4, 3)
    paths = []
    for step, bad in ((1, float("nan")), (2, float("inf"))):
        grad = torch.arange(12, dtype=torch.float32).reshape(3, 4) / 10
        grad[0, 0] = bad
        model.weight.grad, model.bias.grad = grad, torch.ones(3)
        paths.append(write_snapshot(tmp_path / f"s{step}", Holder(model, step)))
    a, b = (read_snapshot(p) for p in paths)
    comparison = compare_snapshots(a, b)
    row = next(r for r in comparison.rows if r.name == "weight")
    assert row.norm_a == pytest.approx(a.stats["weight"].norm, rel=1e-12)
    assert row.norm_b == pytest.approx(b.stats["weight"].norm, rel=1e-12)
    finite = (torch.arange(12, dtype=torch.float64)[1:] / 10).norm()
    assert row.norm_a == pytest.approx(float(finite), rel=1e-6)
    assert (row.nonfinite_a, row.nonfinite_b) == (1, 1) and row.norm_ratio == pytest.approx(1.0)
    assert comparison.total.nonfinite_a == 1
