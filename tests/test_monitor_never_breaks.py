"""A monitor never breaks the loop it watches (issue 19, item 5): a failure inside the
statistics, histograms or update ratios becomes one warning naming the parameter and the
cause; the step goes on, the rest of it is recorded, and what was not is marked — in the
StepGradients, in the run directory and in what ``Run.step_gradients`` reads back."""

import warnings

import numpy as np
import pytest
import torch
from stats_reference import assert_matches, monitored_step
from torch import nn

import gradexplorer as gx
from gradexplorer.core.stats.backends import raw as C
from gradexplorer.core.stats.backends.numba import cpu as backend_cpu
from gradexplorer.core.stats.backends.numba.update_ratio import UpdateTracker
from gradexplorer.core.stats.backends.torch import fused_bins

BAD = 13.0  # the gradient of the parameter whose histogram fails


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 1))
        self.temperature = nn.Parameter(torch.tensor(1.0))

    def forward(self, x):
        return self.body(x).sum() + self.temperature * BAD  # d loss / d temperature = BAD


def break_histograms(monkeypatch, backend: str) -> str:
    """The histogram pass raises for any group holding the gradient BAD, as the degenerate
    range once did (ZeroDivisionError in Numba, IndexError in the torch path)."""
    if backend == "numba":
        real = backend_cpu.pack_histograms

        def fake(pack, stats, *args):
            if (stats[:, C.MIN] == BAD).any():
                raise ZeroDivisionError("float division by zero")
            return real(pack, stats, *args)

        monkeypatch.setattr(backend_cpu, "pack_histograms", fake)
        return "ZeroDivisionError: float division by zero"
    real_torch = fused_bins.histograms

    def fake_torch(prepared, blocks, rows, *args):
        if bool((rows[:, C.MIN] == BAD).any()):
            raise IndexError("index out of range in self")
        return real_torch(prepared, blocks, rows, *args)

    monkeypatch.setattr(fused_bins, "histograms", fake_torch)
    return "IndexError: index out of range in self"


def train(model, steps: int, rec=None) -> list[float]:
    torch.manual_seed(1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    if rec is not None:
        rec = rec(model, optimizer)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = model(torch.randn(8, 4))
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    if rec is not None:
        rec.close()
    return losses


def ours(caught) -> list[str]:
    return [str(w.message) for w in caught if "gradexplorer" in str(w.message)]


def test_a_failing_histogram_is_one_warning_and_the_step_goes_on(monkeypatch, tmp_path, run_cli):
    torch.manual_seed(0)
    plain = Model()
    watched = Model()
    watched.load_state_dict(plain.state_dict())
    expected = train(plain, 3)
    cause = break_histograms(monkeypatch, "numba")
    recorders = []

    def rec(model, optimizer):
        recorders.append(gx.watch(model, optimizer, tmp_path / "run"))
        return recorders[0]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses = train(watched, 3, rec)
    assert losses == expected  # the loop went on, untouched
    lines = ours(caught)
    assert len(lines) == 1, lines  # one warning for three failing steps
    assert "the gradient of temperature" in lines[0] and cause in lines[0]
    record = recorders[0].latest()
    assert record.step == 3 and record.not_recorded == {"temperature": cause}
    assert record.params["temperature"].not_recorded == cause
    assert record.params["temperature"].norm is None and "temperature" not in record.histograms
    assert record.global_norm is None  # not known without every parameter
    for name, p in watched.named_parameters():
        if name != "temperature":  # the others: recorded exactly, histograms and all
            assert_matches(record.params[name], record.histograms[name], p.grad)
    run = gx.open_run(tmp_path / "run")
    assert run.steps == [1, 2, 3]
    assert run.not_recorded(2) == {"temperature": cause}
    back = run.step_gradients(2)
    assert back.not_recorded == {"temperature": cause}
    assert back.params["temperature"].not_recorded == cause
    assert back.params["body.0.weight"].norm > 0 and back.params["body.0.weight"].not_recorded is None
    code, out, _ = run_cli("inspect", str(tmp_path / "run"), "--step", "2")
    assert code == 0 and f"not recorded: temperature ({cause})" in out


@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_each_backend_names_the_parameter_that_failed(monkeypatch, backend):
    torch.manual_seed(0)
    model = Model()
    model(torch.randn(8, 4)).backward()
    cause = break_histograms(monkeypatch, backend)
    monitor = gx.session.GradientMonitor(backend=backend)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    with pytest.warns(RuntimeWarning, match=f"the gradient of temperature .*{cause[:10]}"):
        (record,) = monitored_step(model, optimizer, [monitor])
    assert record.not_recorded == {"temperature": cause}
    assert set(record.histograms) == {n for n, _ in model.named_parameters()} - {"temperature"}
    for name, p in model.named_parameters():
        if name != "temperature":
            assert_matches(record.params[name], record.histograms[name], p.grad)
            assert record.params[name].update_ratio is None  # measured alone, after the step


def test_a_failing_update_ratio_leaves_the_figures_recorded(monkeypatch):
    def broken(self, params, optimizer=None):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(UpdateTracker, "after", broken)
    torch.manual_seed(0)
    model = Model()
    model(torch.randn(8, 4)).backward()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    monitor = gx.session.GradientMonitor()
    with pytest.warns(RuntimeWarning, match=r"the update ratios \(RuntimeError: out of memory\)"):
        (record,) = monitored_step(model, optimizer, [monitor])
    assert record.not_recorded == {"": "RuntimeError: out of memory"}
    assert record.global_norm == pytest.approx(float(torch.linalg.vector_norm(
        torch.cat([p.grad.flatten() for p in model.parameters()]))), rel=1e-6)
    for name, p in model.named_parameters():
        assert_matches(record.params[name], record.histograms[name], p.grad)
        assert record.params[name].update_ratio is None
    assert np.isfinite(record.global_norm)


def test_watch_survives_a_monitor_that_raises_with_one_warning(monkeypatch, tmp_path):
    """Whatever the monitor raises (here: its whole finish) stays inside ``watch``."""
    def broken(self, optimizer, step):
        raise KeyError("nobody expected this")

    monkeypatch.setattr(gx.session.GradientMonitor, "finish", broken)
    torch.manual_seed(0)
    plain, watched = Model(), Model()
    watched.load_state_dict(plain.state_dict())
    expected = train(plain, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses = train(watched, 3, lambda m, o: gx.watch(m, o, tmp_path / "run"))
    assert losses == expected
    lines = ours(caught)
    assert lines == ["gradexplorer: could not measure a step (KeyError: 'nobody expected this'); "
                     "not recorded, training goes on"]
