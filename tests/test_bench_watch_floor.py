"""The floor benchmark runs end to end (the issue's MLP, one short round): every method timed,
the watch without an update ratio really records none, the passes' hooks are taken off."""

import pytest

from tests.script_helpers import load_script


def test_floor_benchmark_reports_every_method():
    bench = load_script("bench", "watch_floor.py")
    result = bench.measure("mlp256", rounds=1, steps=3)
    assert result["numel"] == 263_425
    assert set(result["median"]) == set(bench.METHODS) == set(result["cpu"])
    assert all(seconds > 0 for seconds in result["median"].values())
    assert result["ratios"] == {bench.WATCH: True, bench.WATCH_NO_RATIO: False}
    text = bench.report(result)
    for method in bench.METHODS:
        assert method in text
    assert "watch above the floor" in text


def test_the_passes_hooks_measure_the_step_and_come_off():
    """The update ratio's passes as hooks measure what watch does: ‖Δθ‖ and ‖θ_before‖ of each
    parameter equal a float64 computation from the weights before and after the step; the
    hooks come off."""
    import torch

    bench = load_script("bench", "watch_floor.py")
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    found = []
    handles = bench.passes(model, opt, gradients=True, found=found)
    model(torch.randn(2, 4)).sum().backward()
    before = [p.detach().clone() for p in model.parameters()]
    opt.step()
    after = [p.detach() for p in model.parameters()]
    moved = [(a.double() - b.double()).norm().item() for a, b in zip(after, before, strict=True)]
    sizes = [b.double().norm().item() for b in before]
    assert len(found) == 1 and found[0].shape == (2, 2)
    assert found[0][:, 0].tolist() == pytest.approx(moved, rel=1e-12) and min(moved) > 0
    assert found[0][:, 1].tolist() == pytest.approx(sizes, rel=1e-12)
    for handle in handles:
        handle.remove()
    assert not opt._optimizer_step_pre_hooks and not opt._optimizer_step_post_hooks
