"""ObserveReporter: observe hooks' gradients as plain records, exact against float64."""

from __future__ import annotations

import numpy as np
import torch

from gradexplorer.core.hooks import HookRegistry
from gradexplorer.core.hooks.observed import ObserveReporter, tensor_histogram
from gradexplorer.core.session.engine import StepResult


def test_reporter_records_what_the_hook_saw_exactly():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3))
    seen = {}
    model[2].register_full_backward_hook(
        lambda m, gi, go: seen.update(gi=gi[0].detach().clone(), go=go[0].detach().clone()))
    registry = HookRegistry(model)
    registry.attach("2", "observe")
    reporter = ObserveReporter(registry, bins=16)
    model(torch.randn(11, 5)).pow(2).sum().backward()
    result = StepResult(1, 0.0, None, {})
    reporter.after_step(None, result)
    record = result.observed["2"]
    go = seen["go"].double().numpy()
    assert record.grad_output[0]["shape"] == [11, 3]
    assert np.isclose(record.grad_output[0]["norm"], np.linalg.norm(go), rtol=1e-6)
    hist = record.histograms["grad_output.0"]
    counts, edges = np.histogram(go, bins=16, range=(go.min(), go.max()))
    assert np.array_equal(hist.counts, counts) and np.allclose(hist.edges, edges, rtol=0, atol=0)
    assert record.histograms["grad_input.0"].total == seen["gi"].numel()
    reporter.after_step(None, second := StepResult(2, 0.0, None, {}))
    assert second.observed is None  # the hook did not run again: nothing new


def test_tensor_histogram_counts_nan_and_inf_apart():
    hist = tensor_histogram(torch.tensor([0.0, 1.0, float("nan"), float("inf"), -float("inf")]), 4)
    assert (hist.nan_count, hist.inf_count, int(hist.counts.sum())) == (1, 2, 2)
