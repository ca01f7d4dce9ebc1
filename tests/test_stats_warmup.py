"""The statistics kernels are made ready off the training thread (stats_warmup): in a fresh
environment (an empty Numba cache) the first watched steps compile nothing on the training
thread and measure with the torch backend; once the kernels are loaded a monitor moves to Numba,
and the fallback's figures equal Numba's (the backends' tolerance, test_stats_exactness)."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from gradexplorer.core.stats.backends import warmup as stats_warmup
from gradexplorer.core.stats.backends.kernel_warmup import WAIT_VARIABLE
from gradexplorer.core.stats.backends.numba import warm_pass
from gradexplorer.core.stats.monitor import GradientMonitor

ROOT = Path(__file__).resolve().parents[1]


def test_a_fresh_environment_compiles_nothing_on_the_training_thread(tmp_path):
    cold = tmp_path / "numba-cache"
    cold.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NUMBA_CACHE_DIR": str(cold)}
    env.pop(WAIT_VARIABLE, None)  # as a user's process: the first steps do not wait
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "stats_warmup_run.py"), "3"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=300)
    finally:  # the helper still compiling into the throw-away cache: ended with its group
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert proc.returncode == 0, (out + err)[-4000:]
    seen = json.loads(out.strip().splitlines()[-1])
    assert "MainThread" not in seen["compiled"]  # the steps never waited for a compilation
    assert seen["backends"] == ["torch"] * 3  # the fallback measured them
    assert all(len(step) == 4 and all(np.isfinite(v).all() for v in step.values())
               for step in seen["figures"])


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 6, 3)
        self.fc = nn.Linear(6 * 5 * 5, 4)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).flatten(1))


def steps(monitor: GradientMonitor, count: int, kernels) -> list:
    """``count`` monitored Adam steps of Net (the same seed each time), the kernels
    ``kernels`` (None: not loaded) from the second step on; each step's record and backend."""
    torch.manual_seed(5)
    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    named = list(model.named_parameters())
    out = []
    for step in range(1, count + 1):
        opt.zero_grad()
        model(torch.randn(8, 2, 7, 7)).square().mean().backward()
        model.conv.weight.grad[0, 0, 0, 0] = float("nan") if step == 2 else 0.0
        monitor.begin(named, opt, step)
        opt.step()
        out.append((monitor.finish(opt, step), monitor.backend))
        stats_warmup.STATS.kernels = kernels
    return out


def test_the_fallback_measures_what_numba_measures_and_hands_over(monkeypatch):
    assert stats_warmup.ready()  # conftest: loaded
    loaded = stats_warmup.STATS.kernels
    monkeypatch.setattr(stats_warmup.STATS, "kernels", None)  # as while they load
    early = steps(GradientMonitor(bins=16), 3, None)
    late = steps(GradientMonitor(bins=16), 3, loaded)
    numba = steps(GradientMonitor(bins=16, backend="numba"), 3, loaded)
    assert [b for _, b in early] == ["torch"] * 3
    assert [b for _, b in late] == ["torch", "numba", "numba"]  # moved once loaded
    for (a, _), (b, _) in zip(early + late, numba + numba, strict=True):
        assert a.params.keys() == b.params.keys()
        for name, p in a.params.items():
            q = b.params[name]
            assert (p.nan_count, p.inf_count) == (q.nan_count, q.inf_count)
            for field in ("norm", "mean", "std", "min", "max", "zero_fraction", "update_ratio"):
                x, y = getattr(p, field), getattr(q, field)
                assert x == pytest.approx(y, rel=1e-12, abs=1e-14 * q.abs_max, nan_ok=True), field
            assert np.array_equal(a.histograms[name].counts, b.histograms[name].counts)
            assert np.array_equal(a.histograms[name].edges, b.histograms[name].edges)


def test_the_warm_up_draws_none_of_the_users_random_numbers():
    """It runs beside a seeded loop: the loop's random numbers stay the same."""
    torch.manual_seed(3)
    expected = torch.rand(4)
    torch.manual_seed(3)
    warm_pass.compile_kernels()
    assert torch.equal(torch.rand(4), expected)
