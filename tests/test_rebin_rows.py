"""``rebin_rows`` (the heat map's common grid) equals ``rebin`` row by row."""

import numpy as np

from gradexplorer.core.stats.histogram import rebin, rebin_rows


def test_vectorised_rows_match_rebin_and_keep_counts():
    rng = np.random.default_rng(0)
    lo = rng.normal(size=40) - 3
    hi = lo + rng.uniform(0.1, 5, size=40)
    edges = np.linspace(lo, hi, 17, axis=1)
    counts = rng.integers(0, 100, size=(40, 16)).astype(float)
    counts[5] = 0
    grid = np.linspace(edges[:, 0].min(), edges[:, -1].max(), 17)
    expected = np.asarray([rebin(e, c, grid) for e, c in zip(edges, counts, strict=True)])
    got = rebin_rows(edges, counts, grid)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-9)
    np.testing.assert_allclose(got.sum(axis=1), counts.sum(axis=1))  # nothing lost


def test_uneven_edges_fall_back_to_exact_rebinning():
    edges = np.array([[0.0, 0.1, 1.0, 3.0], [0.0, 1.0, 2.0, 3.0]])
    counts = np.array([[5.0, 1.0, 2.0], [1.0, 1.0, 1.0]])
    grid = np.array([0.0, 1.5, 3.0])
    expected = np.asarray([rebin(e, c, grid) for e, c in zip(edges, counts, strict=True)])
    np.testing.assert_allclose(rebin_rows(edges, counts, grid), expected)
