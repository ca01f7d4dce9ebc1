"""Spike detection's Numba kernels are readied off the training thread (spike_warmup): with a
cold Numba cache the first watched steps return before the kernels are compiled, none is
compiled on the training thread, the events are those of kernels ready from the first step,
no warm-up thread is left after close, and a forked child never waits for the parent's."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gradexplorer.core.diagnose import spike_band, spike_warmup
from gradexplorer.core.diagnose.spikes import SpikeDetector
from gradexplorer.core.stats.backends.kernel_warmup import WAIT_VARIABLE, KernelWarmup

ROOT = Path(__file__).resolve().parents[1]


def test_a_cold_cache_compiles_the_spike_kernels_off_the_training_thread(tmp_path):
    cold = tmp_path / "numba-cache"
    cold.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("NUMBA_CACHE_DIR", None)  # the statistics kernels' own cache (the script's first loop)
    env.pop(WAIT_VARIABLE, None)  # as a user's process: the first steps do not wait
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "spike_warmup_run.py"), str(cold),
                           str(tmp_path / "runs")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    first, again = out["first"], out["again"]
    assert "MainThread" not in out["compiled"]  # the training thread compiled no spike kernel
    assert list(cold.rglob("spike_kernels.observe_step-*.nbi")), "compiled into the cold cache"
    assert first["ready"][:3] == [False] * 3  # those steps returned before the kernels were ready
    assert all(first["ready"][3:]) and all(again["ready"])
    assert first["forked"] == 0  # the child forked mid warm-up: no wait, numpy found its spike
    assert first["threads"] == []  # no warm-up thread left after close
    assert [e["step"] for e in first["events"]] == [45]
    assert first["events"] == again["events"]  # numpy's steps, then the kernels': the same figures


def test_a_failed_warm_up_is_one_warning_and_numpy_goes_on(monkeypatch):
    fresh = KernelWarmup(spike_warmup.__name__, "spike", spike_warmup._cached, "spike-test",
                         spike_warmup.WARMUP.fallback)
    monkeypatch.setattr(spike_warmup, "WARMUP", fresh)
    monkeypatch.setattr(spike_warmup, "wait", fresh.wait)
    monkeypatch.setattr(fresh, "_compile_in_helper", lambda: None)
    monkeypatch.delenv(WAIT_VARIABLE, raising=False)

    def broken(kernels=None):
        raise RuntimeError("no LLVM today")
    monkeypatch.setattr(spike_warmup, "compile_kernels", broken)
    with pytest.warns(RuntimeWarning, match="no LLVM today.*goes on with numpy"):
        assert spike_warmup.ready() is None
        assert spike_warmup.wait(600)
    assert spike_band.spike_kernels() is not None and spike_warmup.ready() is None
    detector = SpikeDetector()
    assert detector.observe(1, 1.0) is None
    event = detector.observe(2, math.nan)
    assert event is not None and event.reasons == ["loss at NaN/Inf at step 2"]
    detector.close()
