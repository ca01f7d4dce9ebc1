"""A run directory's momentum norms (SGD's ``momentum_buffer``, Adam's ``exp_avg``) are read in
the update ratio's pass after the step (``numba.update_state``): the same figures as a float64
computation of the state, the update ratio's too, NaN, Inf and tiny values included."""

import math

import numpy as np
import pytest
import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.core.runs.run import open_run
from gradexplorer.core.stats.backends import warmup
from gradexplorer.core.stats.backends.numba import update_state as US
from gradexplorer.core.stats.backends.numba import worker as WK


@pytest.fixture(autouse=True)
def kernels_loaded():
    warmup.ready()
    warmup.wait()


def norm64(t: torch.Tensor) -> float:
    """‖t‖ in float64, scaled by its largest value (no square underflows or overflows)."""
    x = t.double()
    top = x.abs().max().item() if x.numel() else 0.0
    if top == 0.0 or not math.isfinite(top):
        return torch.linalg.vector_norm(x).item()
    return top * torch.linalg.vector_norm(x / top).item()


def same(got: float, want: float) -> bool:
    return (math.isnan(got) and math.isnan(want)) or got == want or math.isclose(got, want, rel_tol=1e-13)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_three_norms_of_each_tensor_equal_float64(dtype):
    g = torch.Generator().manual_seed(0)
    sizes = (1, 7, 1000, 70_000)
    before = [torch.randn(n, generator=g, dtype=dtype) for n in sizes]
    after = [b + 1e-3 * torch.randn(n, generator=g, dtype=dtype) for b, n in zip(before, sizes, strict=True)]
    states = [torch.randn(n, generator=g, dtype=dtype) for n in sizes]
    tiny = 1e-170 if dtype == torch.float64 else 1e-30  # squares subnormal (float64) or not
    big = 1e200 if dtype == torch.float64 else 3e38  # squares overflow (float64) or not
    extra = [  # (after, before, state): non-finite and tiny values, zeros
        (torch.tensor([1.0, math.nan, 2.0]), torch.ones(3), torch.ones(3)),
        (torch.ones(3), torch.ones(3), torch.tensor([1.0, math.inf, -2.0])),
        (torch.tensor([math.inf, 0.0]), torch.zeros(2), torch.tensor([math.nan, 1.0])),
        (torch.full((5,), 2 * tiny, dtype=torch.float64), torch.full((5,), tiny, dtype=torch.float64),
         torch.full((5,), tiny, dtype=torch.float64)),
        (torch.zeros(4), torch.zeros(4), torch.zeros(4)),
        (torch.full((3,), big, dtype=torch.float64), torch.full((3,), -big, dtype=torch.float64),
         torch.full((3,), big, dtype=torch.float64)),
    ]
    for a, b, s in extra:
        after.append(a.to(dtype))
        before.append(b.to(dtype))
        states.append(s.to(dtype))
    copies = US.UpdateStateCopies()
    copies.take(before)
    for b, a in zip(before, after, strict=True):  # the "step": the weights change in place
        b.copy_(a)
    update, norms = copies.update_state_norms(before, None, states)
    assert norms is not None  # read in the one pass
    alone = copies.update_norms(before)  # the update ratio's own pass
    for i, (a, old, s) in enumerate(zip(after, copies_before(copies, before), states, strict=True)):
        assert same(norms[i], norm64(s)), (i, norms[i], norm64(s))
        # the update ratio's own pass gives the same bits (one compiled loop: kernels.update_state_sums)
        assert np.array_equal(update[i], alone[i], equal_nan=True), (i, update[i], alone[i])
        if bool(torch.isfinite(a).all() and torch.isfinite(old).all()):  # tiny and huge too
            want = (norm64(a.double() - old.double()), norm64(old))
            assert all(same(x, y) for x, y in zip(update[i], want, strict=True)), (i, update[i], want)
    assert update.shape == (len(after), 2)


def copies_before(copies: US.UpdateStateCopies, params) -> list[torch.Tensor]:
    """The weights as copied before the step (from the copies' buffer)."""
    flat = torch.from_numpy(copies._buffer.flat)
    return [flat[s:s + p.numel()] for s, p in zip(copies._buffer.starts.tolist(), params, strict=True)]


def test_states_that_cannot_be_read_beside_the_weights_are_left_to_the_caller():
    params = [torch.randn(10), torch.randn(20)]
    copies = US.UpdateStateCopies()
    copies.take(params)
    _, norms = copies.update_state_norms(params, None, [torch.randn(10), torch.randn(21)])
    assert norms is None  # another size
    update, norms = copies.update_state_norms(params, None, [torch.randn(10), torch.randn(20, 2)[:, 0]])
    assert norms is None and np.array_equal(update[:, 0], [0.0, 0.0])  # not contiguous


@pytest.mark.parametrize(("kind", "too_big"), [("sgd", False), ("adam", False), ("sgd", True)])
def test_a_watched_run_records_the_momentum_norms_from_the_update_pass(tmp_path, monkeypatch,
                                                                      kind, too_big):
    """A step's momentum norms are read in the update pass; a step too big for the worker
    (GPT-2 small's) has them read apart, off the training thread where a core is free, as
    before. Float64 figures either way."""
    if too_big:
        monkeypatch.setattr(WK, "OFFLOAD_MAX", 16)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9) if kind == "sgd" \
        else torch.optim.Adam(model.parameters(), lr=0.01)
    field, key = ("momentum_buffer", "momentum_norm") if kind == "sgd" else ("exp_avg", "exp_avg_norm")
    names = [n for n, _ in model.named_parameters()]
    expected, found = [], []
    with gx.watch(model, opt, tmp_path / "run") as rec:
        for _ in range(3):
            opt.zero_grad()
            nn.functional.mse_loss(model(torch.randn(16, 256)), torch.randn(16, 1)).backward()
            opt.step()
            found.append(rec.monitor.found_state_norms is not None)
            expected.append({n: norm64(opt.state[p][field]) for n, p in zip(
                names, model.parameters(), strict=True)})
    assert found == [not too_big] * 3  # read in the update ratio's pass, or apart
    with open_run(tmp_path / "run") as run:
        for step, want in zip(run.steps, expected, strict=True):
            state = run.optimizer_state(step)
            for name in names:
                assert math.isclose(getattr(state[name], key), want[name], rel_tol=1e-13)


def test_in_memory_nothing_of_the_state_is_read(tmp_path):
    model = nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    with gx.watch(model, opt) as rec:
        for _ in range(2):
            opt.zero_grad()
            model(torch.randn(4, 8)).sum().backward()
            opt.step()
        assert rec.monitor.found_state_norms is None


def test_a_parameter_the_optimizer_does_not_hold_leaves_the_state_to_optimizer_state(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 1))  # the optimizer holds the first only
    opt = torch.optim.SGD(model[0].parameters(), lr=0.1, momentum=0.9)
    with gx.watch(model, opt, tmp_path / "run") as rec:
        for _ in range(2):
            opt.zero_grad()
            model(torch.randn(4, 8)).sum().backward()
            opt.step()
            assert rec.monitor.found_state_norms is None  # not read in the update pass
        expected = {f"0.{n}": norm64(opt.state[p]["momentum_buffer"])
                    for n, p in model[0].named_parameters()}
    with open_run(tmp_path / "run") as run:
        state = run.optimizer_state(run.steps[-1])
        for name, want in expected.items():
            assert math.isclose(state[name].momentum_norm, want, rel_tol=1e-13)
        assert state.get("1.weight") is None or state["1.weight"].momentum_norm is None
