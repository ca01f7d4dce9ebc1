"""A step too big for the statistics worker (more than ``OFFLOAD_MAX`` values: GPT-2 small's
124M) still has its optimizer state read off the training thread: by the run's writer thread,
when it writes the step during the next forward and backward, or — where it has not got there
— by the next step's pre-hook, before the step changes the state. Either way the figures are
those of the state after their own step, equal to a float64 computation of it."""

import threading

import pytest
import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.core.runs import write_thread as WT
from gradexplorer.core.stats import optimizer_state as O
from gradexplorer.core.stats.backends import warmup
from gradexplorer.core.stats.backends.numba import worker as W

STEPS = 4


def momentum_run(run_dir, flush: bool) -> list[dict[str, float]]:
    """SGD with momentum recorded into ``run_dir``; each step's ‖momentum buffer‖ (float64,
    computed here) returned. ``flush``: the writer writes each step before the next begins."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    names = [n for n, _ in model.named_parameters()]
    expected = []
    with gx.watch(model, opt, run_dir) as rec:
        for step in range(STEPS):
            g = torch.Generator().manual_seed(step)
            opt.zero_grad()
            nn.functional.mse_loss(model(torch.randn(16, 64, generator=g)),
                                   torch.randn(16, 1, generator=g)).backward()
            opt.step()
            expected.append({n: opt.state[p]["momentum_buffer"].double().norm().item()
                             for n, p in zip(names, model.parameters(), strict=True)})
            if flush:
                rec.writer.flush()
    return expected


@pytest.fixture
def too_big_for_the_worker(monkeypatch):
    """Every step above the worker's limit, one torch thread and a core free, the kernels
    loaded (the in-place path, as on GPT-2 small)."""
    monkeypatch.setattr(W, "OFFLOAD_MAX", 16)
    monkeypatch.setattr(W, "_CORES", 4)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    warmup.ready()
    warmup.wait()
    yield
    torch.set_num_threads(before)


def test_a_step_too_big_for_the_worker_has_its_state_read_by_the_writer(tmp_path, monkeypatch,
                                                                        too_big_for_the_worker):
    threads = []
    real = O.optimizer_state

    def spy(*args, **kwargs):
        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)
    monkeypatch.setattr(O, "optimizer_state", spy)
    by_writer = momentum_run(tmp_path / "writer", flush=True)
    assert threads == ["gradexplorer-run-writer"] * STEPS
    threads.clear()
    monkeypatch.setattr(WT, "PERIOD", 3600)  # the writer waits: the next pre-hook reads it
    by_hook = momentum_run(tmp_path / "hook", flush=False)
    assert threads == [threading.current_thread().name] * STEPS
    threads.clear()
    monkeypatch.setattr(W, "_CORES", 1)  # no core free: read at once, as before
    monkeypatch.setattr(WT, "PERIOD", 0.2)
    at_once = momentum_run(tmp_path / "now", flush=True)
    assert threads == [threading.current_thread().name] * STEPS
    assert by_writer == by_hook == at_once
    runs = [gx.open_run(tmp_path / name) for name in ("writer", "hook", "now")]
    try:
        for step, expected in enumerate(by_writer, 1):
            states = [run.optimizer_state(step) for run in runs]
            assert states[0] == states[1] == states[2]
            for name, norm in expected.items():
                assert states[0][name].momentum_norm == pytest.approx(norm, rel=1e-12)
    finally:
        for run in runs:
            run.close()
