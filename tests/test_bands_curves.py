"""Distribution bands from the exact histograms (against numpy on the raw gradients), TensorBoard's
debiased EMA (against a transcription of TensorBoard's own loop), display downsampling, CSV."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.core.stats.bands import BAND_NAMES, BAND_QUANTILES, distribution_bands, histogram_quantiles
from gradexplorer.core.stats.curves import csv_text, downsample_peaks, ema_smooth, thin_steps


def reference_quantile(edges, counts, q):
    """The rule stated in bands.py computed another way: bisection on the histogram's CDF
    (uniform density in each bin), float64, to the last bit."""
    cum = np.concatenate([[0.0], np.cumsum(counts, dtype=np.float64)])
    target = q * cum[-1]
    nonempty = np.flatnonzero(counts)
    lo, hi = edges[nonempty[0]], edges[nonempty[-1] + 1]
    if q == 0:
        return lo
    for _ in range(200):  # smallest x with CDF(x) >= target
        mid = (lo + hi) / 2
        if np.interp(mid, edges, cum) >= target:
            hi = mid
        else:
            lo = mid
    return hi


@pytest.fixture(scope="module")
def gradients():
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(40, 30), nn.ReLU(), nn.Linear(30, 10))
    model(torch.randn(64, 40)).logsumexp(1).mean().backward()
    return model, gx.session.gradient_stats(model, bins=32)


def test_bands_of_the_monitors_histograms_follow_the_stated_rule(gradients):
    model, g = gradients
    for name, p in model.named_parameters():
        raw = p.grad.double().flatten().numpy()
        h = g.histograms[name]
        counts, edges = np.histogram(raw, bins=h.edges)  # numpy's histogram of the raw data
        assert counts.tolist() == h.counts.tolist()
        got = histogram_quantiles(h.edges, h.counts)
        for q, value in zip(BAND_QUANTILES, got, strict=True):
            want = reference_quantile(edges, counts, q)
            assert value == pytest.approx(want, rel=1e-12, abs=1e-15 * np.ptp(raw)), (name, q)
            width = edges[1] - edges[0]
            # the value numpy's inverted-CDF quantile of the raw data picks lies in the same bin
            sample = np.quantile(raw, q, method="inverted_cdf")
            assert abs(value - sample) <= width * (1 + 1e-9), (name, q)
        assert got[0] == raw.min() and got[-1] == raw.max()  # auto range: exact extremes


def test_band_edge_cases():
    edges = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    # empty bins in the middle: the median is where the cumulative count first reaches half
    q = histogram_quantiles(edges, np.array([2, 0, 0, 2]), (0.0, 0.25, 0.5, 0.75, 1.0))
    assert q.tolist() == [0.0, 0.5, 1.0, 3.5, 4.0]
    # empty leading/trailing bins: min and max are the outer edges of the bins that hold values
    q = histogram_quantiles(edges, np.array([0, 4, 0, 0]), (0.0, 0.5, 1.0))
    assert q.tolist() == [1.0, 1.5, 2.0]
    bands = distribution_bands(np.stack([edges, edges]), np.array([[0, 0, 0, 0], [1, 1, 1, 1]]))
    assert set(bands) == set(BAND_NAMES)
    assert all(math.isnan(bands[n][0]) for n in BAND_NAMES)  # an empty histogram: no band
    assert bands["median"][1] == 2.0 and bands["p25"][1] == 1.0


def tensorboard_smoothing(values, weight):
    """TensorBoard's scalar dashboard smoothing loop, transcribed line by line."""
    last, num_accum, out = 0.0, 0, []
    is_constant = all(v == values[0] for v in values)
    for v in values:
        if is_constant or not math.isfinite(v):
            out.append(v)
        else:
            last = last * weight + (1 - weight) * v
            num_accum += 1
            debias = 1 - weight ** num_accum if weight != 1 else 1
            out.append(last / debias)
    return out


@pytest.mark.parametrize("weight", [0.0, 0.3, 0.6, 0.9, 0.999])
def test_ema_is_tensorboards(weight):
    rng = np.random.default_rng(0)
    values = np.cumsum(rng.normal(size=500)) + 10
    values[[17, 300]] = [np.nan, np.inf]
    got = ema_smooth(values, weight)
    want = tensorboard_smoothing(values.tolist(), weight)
    finite = np.isfinite(values)
    assert got[finite] == pytest.approx(np.array(want)[finite], rel=1e-9)
    assert np.isnan(got[17]) and got[300] == np.inf
    assert got[0] == pytest.approx(values[0], rel=1e-15)  # debiased: the first point is itself
    assert ema_smooth(np.full(5, 2.5), 0.9).tolist() == [2.5] * 5
    with pytest.raises(ValueError):
        ema_smooth(values, 1.0)


def test_downsampling_keeps_spikes_and_nan():
    x = np.arange(10_000)
    y = np.sin(x / 300.0)
    y[4321] = 50.0
    y[777] = np.nan
    dx, dy = downsample_peaks(x, y, 400)
    assert len(dx) <= 400 and 4321 in dx.tolist() and 777 in dx.tolist()
    assert np.all(np.diff(dx) > 0) and dx[0] == 0
    assert downsample_peaks(x[:50], y[:50], 400)[0].tolist() == list(range(50))
    assert thin_steps(list(range(1, 1001)), 5) == [1, 251, 501, 750, 1000]


def test_downsampling_keeps_each_buckets_first_low_and_high_in_order():
    """The points kept are the rule computed bucket by bucket: a bucket's first non-finite
    point where it has one, else its first lowest and first highest point, in step order
    (once where they are one point); on curves with ties, plateaus, NaN and ±inf."""
    rng = np.random.default_rng(5)
    for n, most in ((1000, 100), (1001, 101), (5000, 4), (777, 300), (20_000, 1600)):
        y = np.round(rng.standard_normal(n), 1)  # ties
        y[rng.integers(0, n, 6)] = [np.nan, np.inf, -np.inf, np.nan, 9.0, -9.0]
        y[n // 3:n // 3 + 50] = 0.5  # a plateau
        x = np.arange(n) * 2 + 7
        bounds = np.linspace(0, n, most // 2 + 1).astype(np.int64)
        want = []
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            bad = [i for i in range(a, b) if not np.isfinite(y[i])]
            if bad:
                want.append(bad[0])
                continue
            chunk = y[a:b].tolist()
            low = a + chunk.index(min(chunk))
            high = a + chunk.index(max(chunk))
            want += sorted({low, high})
        dx, dy = downsample_peaks(x, y, most)
        assert dx.tolist() == x[want].tolist()
        assert np.array_equal(dy, y[want], equal_nan=True)


def test_csv_text_is_exact():
    text = csv_text(["step", "value"], [(1, 0.1), (2, np.float64(1 / 3)), (3, None)])
    assert text == f"step,value\n1,0.1\n2,{1 / 3!r}\n3,\n"
