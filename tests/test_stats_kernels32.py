"""The float32 integer scan (kernels32) gives the float passes' min, max, zeros and finiteness
bit for bit, signed zeros included, and the moments of a float32 gradient are what the float64
path gives (the same kernels, read as float64)."""

import numpy as np
import pytest

from gradexplorer.core.stats.backends.numba import kernels as K
from gradexplorer.core.stats.backends.numba import kernels32 as K32
from gradexplorer.core.stats.backends.raw import INFS, MOMENT_COLUMNS, NANS

VALUES = np.array([0.0, -0.0, 1e-45, -1e-45, 1.0, -1.0, 2.5, -3e38, 3e38, 1e-38, -1e-38], np.float32)


def float_passes(x: np.ndarray):
    total, zeros = K._sum_and_zeros(x)
    lo, hi = K._finite_min_max(x)
    return total - total == 0.0, zeros, np.float64(lo).tobytes(), np.float64(hi).tobytes()


def scan(x: np.ndarray):
    finite, zeros, lo, hi = K32.scan32(x)
    return finite, zeros, np.float64(lo).tobytes(), np.float64(hi).tobytes()


@pytest.mark.parametrize("values", [[0.0, -0.0], [-0.0, 0.0], [1.0, -0.0, 0.0], [-1.0, 0.0, -0.0],
                                    [-1.0, -0.0, 0.0], [-0.0] * 9 + [0.0], [5.0, -1e-45, 1e-45]])
def test_signed_zeros_as_the_float_passes_keep_them(values):
    x = np.array(values, np.float32)
    assert scan(x) == float_passes(x)


def test_random_arrays_of_awkward_values_match_the_float_passes():
    rng = np.random.default_rng(26)
    for _ in range(500):
        x = rng.choice(VALUES, int(rng.integers(1, 200)))
        if rng.random() < 0.5 and (x <= 0).any():
            x = x[x <= 0]
        assert scan(x) == float_passes(x), x


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_non_finite_value_is_seen(bad):
    x = np.linspace(-1, 1, 1000, dtype=np.float32)
    x[417] = bad
    assert not K32.scan32(x)[0]
    row = np.zeros(MOMENT_COLUMNS)
    K.moments_of(x, row)
    assert row[NANS] + row[INFS] == 1  # the careful scan counted it


def test_float32_moments_equal_the_float64_path_where_the_values_are_the_same():
    x = np.random.default_rng(1).standard_normal(70001).astype(np.float32)
    x[::13] = 0.0
    a, b = np.zeros(MOMENT_COLUMNS), np.zeros(MOMENT_COLUMNS)
    K.moments_of(x, a)
    K.moments_of(x.astype(np.float64), b)
    assert a[:6].tobytes() == b[:6].tobytes()  # min, max, zeros, NaN, Inf, finite: exact


@pytest.mark.parametrize("lo, hi, bins", [(-1.27, 1.09, 64), (1e4, 1e4 + 0.5, 64), (-3.0, 3.0, 7),
                                          (-1e-30, 1e-30, 64)])
def test_float32_histograms_equal_numpy_with_values_on_and_beside_every_edge(lo, hi, bins):
    # the fast histogram fixes only the values its float32 guess marks near an edge (NEAR):
    # every float32 on an edge, one float32 either side of it, spread among ordinary values
    # (a chunk of mostly far values, a few near ones), and a size-1 array, equal np.histogram
    from gradexplorer.core.stats.histogram import histogram_edges

    edges = histogram_edges(np.array([lo]), np.array([hi]), bins)[0]
    on = edges.astype(np.float32)
    on = on[(on >= edges[0]) & (on <= edges[-1])]
    beside = np.concatenate([np.nextafter(on, np.float32(np.inf)), np.nextafter(on, np.float32(-np.inf))])
    rng = np.random.default_rng(5)
    far = rng.uniform(lo, hi, 3000).astype(np.float32)
    x = np.concatenate([far, on, beside])
    x = x[(x >= edges[0]) & (x <= edges[-1])]
    rng.shuffle(x)
    for values in (x, x[:1]):
        counts, extra = np.zeros(bins, np.int64), np.zeros(4, np.int64)
        guess, lanes = np.empty(K.CHUNK, np.int32), np.zeros((8, bins), np.int64)
        K.histogram_of(values, edges, counts, extra, False, guess, lanes)
        assert np.array_equal(counts, np.histogram(values.astype(np.float64), bins=edges)[0])
        assert not extra.any() and not lanes.any()


def on_and_beside(edges: np.ndarray) -> np.ndarray:
    """Every edge as a float32 and the float32 either side of it, those inside the edges."""
    on = edges.astype(np.float32)
    near = np.concatenate([on, np.nextafter(on, np.float32(np.inf)), np.nextafter(on, np.float32(-np.inf))])
    return near[(near >= edges[0]) & (near <= edges[-1])]


@pytest.mark.parametrize("lo, hi, bins", [(-1.27, 1.09, 64), (-3.0, 3.0, 7), (0.25, 0.75, 1), (-2.0, 5.0, 63),
                                          (-1e-30, 1e-30, 64), (-1e-36, 1e-36, 64), (-1.0, 1.0, 65)])
def test_pairs_of_values_count_as_numpy_with_values_on_and_beside_every_edge(lo, hi, bins):
    # pair_histogram32 counts a chunk's first half paired with its second: values on an edge,
    # one float32 either side of it, and the range's ends, in both halves of many chunks (the
    # later ones fetched ahead), whole chunks and a tail; counts equal np.histogram whether the
    # pairs take them (64 bins or fewer, a fixed-point scale float32 holds) or the single path
    from gradexplorer.core.stats.histogram import histogram_edges

    edges = histogram_edges(np.array([lo]), np.array([hi]), bins)[0]
    near = on_and_beside(edges)
    rng = np.random.default_rng(42)
    x = rng.uniform(lo, hi, 40 * K32.PAIR_CHUNK + 77).astype(np.float32)
    x = np.clip(x, np.float32(edges[0]), np.float32(edges[-1]))
    x = x[(x >= edges[0]) & (x <= edges[-1])]
    spots = rng.choice(x.size, 4 * near.size, replace=False)
    x[spots] = np.tile(near, 4)
    whole = x.size - x.size % K32.PAIR_CHUNK
    scale = bins / (edges[-1] - edges[0])
    paired = whole if float(np.float32(scale)) * 2.0**K32.FRACTION < 3e38 else 0  # else: none
    delta = 4 * 2.0**-23 * ((abs(edges[0]) + abs(edges[-1])) * scale + bins)
    if bins <= K32.PAIR_BINS:
        counts = np.zeros(bins, np.int64)
        assert K32.pair_histogram32(x, edges, counts, delta) == paired
        assert np.array_equal(counts, np.histogram(x[:paired].astype(np.float64), bins=edges)[0])
    counts, extra = np.zeros(bins, np.int64), np.zeros(4, np.int64)
    guess, lanes = np.empty(K.CHUNK, np.int32), np.zeros((8, bins), np.int64)
    K.histogram_of(x, edges, counts, extra, False, guess, lanes)
    assert np.array_equal(counts, np.histogram(x.astype(np.float64), bins=edges)[0])
    assert not extra.any() and not lanes.any()


def test_histograms_of_random_ranges_bins_and_sizes_equal_numpy():
    # whatever path each takes (pairs, single values, the exact search), the counts of float32
    # values of many shapes, offsets and widths, a third of them on or beside an edge, equal
    # np.histogram with the same float64 edges (ends a little outside the values: not float32s)
    from gradexplorer.core.stats.histogram import histogram_edges

    rng = np.random.default_rng(42)
    for _ in range(200):
        bins = int(rng.choice([1, 2, 7, 31, 64, 65]))
        centre = float(rng.choice([0.0, 1.0, -3.0, 1e3, 1e-20]))
        width = float(10.0 ** (rng.uniform(-30, 30) if rng.random() < 0.3 else rng.uniform(-6, 2)))
        n = int(rng.choice([1, 255, 256, 257, 1300, 5000]))
        x = (rng.standard_cauchy(n) if rng.random() < 0.5 else rng.standard_normal(n)) * width + centre
        x = x.astype(np.float32)
        below, above = rng.uniform(0, 0.1, 2) * (float(x.max()) - float(x.min()))  # float64 ends
        edges = histogram_edges(np.array([x.min() - below]), np.array([x.max() + above]), bins)[0]
        if not (np.isfinite(x).all() and np.isfinite(edges).all() and (np.diff(edges) > 0).all()):
            continue
        x[rng.choice(n, n // 3, replace=False)] = rng.choice(on_and_beside(edges), n // 3)
        counts, extra = np.zeros(bins, np.int64), np.zeros(4, np.int64)
        guess, lanes = np.empty(K.CHUNK, np.int32), np.zeros((8, bins), np.int64)
        K.histogram_of(x, edges, counts, extra, False, guess, lanes)
        expected = np.histogram(x.astype(np.float64), bins=edges)[0]
        assert np.array_equal(counts, expected), (bins, edges[0], edges[-1])
