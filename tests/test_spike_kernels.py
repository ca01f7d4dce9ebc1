"""The spike detector's Numba step (spike_kernels) finds the same events, with the same
figures bit for bit, as the numpy operations it replaces, also when the kernels become ready
while a detector runs (spike_warmup); its bands are medians of rows sorted by numpy."""

import json
import math

import numpy as np
import pytest

from gradexplorer.core.diagnose import spike_band, spike_warmup
from gradexplorer.core.diagnose.spike_band import MAD_TO_SIGMA, RollingBands, SpikeSettings
from gradexplorer.core.diagnose.spikes import SpikeDetector
from gradexplorer.core.stats.records import ParamStats, StepGradients

NAMES = [f"l{i}.weight" for i in range(6)] + ["head.bias"]


def stream(settings: SpikeSettings, kernels_from: int = 1) -> list:
    """Every step's event (as JSON) over 400 steps holding spikes, NaN, Inf, a non-positive
    loss, steps without a record and a parameter missing for a while; the kernels (when
    ready) do the steps from ``kernels_from`` on, numpy's operations the ones before."""
    rng = np.random.default_rng(0)
    detector, out = SpikeDetector(settings), []
    kernels = spike_band._KERNELS
    for step in range(1, 400):
        spike_band._KERNELS = False if step < kernels_from else kernels
        params = {}
        for j, name in enumerate(NAMES):
            if j == 6 and 50 < step < 80:
                continue
            norm = float(np.exp(rng.normal(0, 0.05)) * (j + 1)) * (1000 if step in (120, 121, 250)
                                                                   and j == 2 else 1)
            update = None if j == 3 else (math.inf if step == 330 and j == 4
                                          else float(np.exp(rng.normal(-5, 0.1))))
            params[name] = ParamStats(name, (3,), 3, True, norm=norm, nan_count=int(step == 300 and j == 1),
                                      inf_count=0, update_ratio=update)
        loss = {200: 50.0, 210: math.nan, 220: -1.0}.get(step, float(np.exp(rng.normal(0, 0.02))))
        record = None if step % 37 == 0 else StepGradients(step, None, 0, params)
        event = detector.observe(step, None if step == 150 else loss, record,
                                 None if record is not None else 1.0)
        out.append(None if event is None else json.dumps(event.to_json(), sort_keys=True))
    return out


@pytest.mark.parametrize("settings", [SpikeSettings(), SpikeSettings(window=16, warmup=8, k=4.0, onset_k=2.0,
                                                                      refresh=1),
                                      SpikeSettings(window=200, warmup=20, k=5.0)])
def test_kernel_step_finds_the_numpy_steps_events(monkeypatch, settings):
    assert spike_band.spike_kernels() is not None, "the Numba kernels should load here"
    monkeypatch.setattr(spike_band, "_KERNELS", spike_band._KERNELS)  # put back after the test
    spike_warmup.ready()
    assert spike_warmup.wait(600) and spike_warmup.ready() is not None, "and be made ready"
    kernels = spike_band.spike_kernels()
    fast = stream(settings)
    # kernels ready while the detector runs (numpy before): from a step whose band was the
    # median of an odd count (a strided numpy view), after the window filled, mid-event
    switched = [stream(settings, kernels_from=n) for n in (4, 7, 90, 122)]
    # the numpy bands handed over do not need another compilation (on the training thread)
    assert [len(k.signatures) for k in (kernels.observe_step, kernels.log_inputs)] == [1, 1]
    monkeypatch.setattr(spike_band, "_KERNELS", False)  # the numpy operations
    slow = stream(settings)
    assert fast == slow
    assert all(s == slow for s in switched)
    assert sum(e is not None for e in fast) >= 5


def median(rows: np.ndarray) -> np.ndarray:
    """The middle of each row sorted by numpy (NaN last), the mean of the two middle ones
    for an even length: a band's centre (a missing value early on is NaN in its history)."""
    s = np.sort(rows, axis=1)
    n = s.shape[1]
    return s[:, n // 2] if n % 2 else (s[:, n // 2 - 1] + s[:, n // 2]) / 2


@pytest.mark.parametrize("numba", [True, False])
@pytest.mark.parametrize("window", [8, 9, 300])  # even, odd, beyond the insertion sort
def test_bands_are_the_sorted_rows_median_and_mad(window, numba):
    kernels = spike_band.spike_kernels() if numba else None
    rng = np.random.default_rng(window)
    bands = RollingBands(SpikeSettings(window=window, warmup=1, onset_k=1.0, k=1.0, refresh=1), 5)
    for step in range(window + 3):
        t = rng.normal(size=5)
        t[step % 5] = np.nan  # missing values repeat the last one
        bands.push(t, kernels)
        z, centre, width = bands.score(np.zeros(5), kernels)
        hist = bands._buf[:, :bands._filled]
        want = median(hist)
        assert np.array_equal(centre, want, equal_nan=True)
        mad = median(np.abs(hist - want[:, None]))
        assert np.array_equal(width, np.maximum(MAD_TO_SIGMA * mad, 0.1), equal_nan=True)
