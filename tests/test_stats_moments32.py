"""The one-pass float32 moments (``moments32``) give an independent float64 computation's
norm, mean, std, min, max and zero fraction on hostile data (mean ≫ std, constants, a single
value, extremes, subnormals, sizes across block edges), the integer counts bit for bit as the
two-pass path, and leave NaN/Inf to the careful passes."""

import math

import numpy as np
import pytest
from stats_reference import reference

from gradexplorer.core.stats.backends.numba import kernels as K
from gradexplorer.core.stats.backends.numba import moments32 as M
from gradexplorer.core.stats.backends.numba.kernels_rows import COLUMNS, stat_columns
from gradexplorer.core.stats.backends.raw import (
    DSUM,
    FINITE,
    INFS,
    MAX,
    MIN,
    MOMENT_COLUMNS,
    NANS,
    SHIFT,
    ZEROS,
)

FIELDS = ("norm", "mean", "std", "min", "max", "abs_max", "zero_fraction")


def figures(row: np.ndarray, n: int) -> dict:
    out, counts = np.empty((1, COLUMNS)), np.empty((1, 2), np.int64)
    stat_columns(row[None], np.array([n], np.float64), row[None], False, out, counts)
    return dict(zip(FIELDS, out[0][:len(FIELDS)].tolist(), strict=True))


def hostile(rng: np.random.Generator) -> list[np.ndarray]:
    b = M.BLOCK
    noise = rng.standard_normal(3 * b + 17)
    return [
        (1e4 + 1e-3 * noise).astype(np.float32),  # mean ≫ std
        (-3e5 + 0.01 * rng.standard_normal(b * 5)).astype(np.float32),
        np.full(b * 3 + 5, 0.1, np.float32),  # constant: std exactly 0
        np.full(7, -2.5e-39, np.float32),  # a subnormal constant
        np.array([3.25], np.float32),  # size 1
        np.zeros(b + 1, np.float32),
        np.array([3e38, -3e38, 1e-45, 0.0, -0.0] * 500, np.float32),  # extremes
        (rng.standard_normal(b - 1) * 1e-30).astype(np.float32),
        np.concatenate([np.full(b, 1e6), 1e6 + rng.standard_normal(b)]).astype(np.float32),
        np.concatenate([rng.standard_normal(b), np.full(b, -7e3)]).astype(np.float32),  # a step
        rng.standard_normal(b * 2).astype(np.float32),  # exactly two blocks
    ]


def test_hostile_float32_data_equal_a_float64_reference():
    rng = np.random.default_rng(42)
    for x in hostile(rng):
        row = np.zeros(MOMENT_COLUMNS)
        assert M.one_pass32(x, row)
        got, expected = figures(row, x.size), reference(x)
        for field in FIELDS:
            floor = 1e-14 * expected["abs_max"] if field == "mean" else 1e-300
            assert math.isclose(got[field], expected[field], rel_tol=1e-12, abs_tol=floor), \
                (x[:3], x.size, field, got[field], expected[field])
        if x.min() == x.max():
            assert got["std"] == 0.0 and got["mean"] == float(x[0])


def test_counts_and_extremes_equal_the_two_pass_path_bit_for_bit():
    rng = np.random.default_rng(7)
    for size in (1, 2, M.BLOCK - 1, M.BLOCK, M.BLOCK + 1, 5 * M.BLOCK + 3):
        x = rng.standard_normal(size).astype(np.float32)
        x[:: 5] = 0.0
        x[1:: 11] = -0.0
        one, two = np.zeros(MOMENT_COLUMNS), np.zeros(MOMENT_COLUMNS)
        assert M.one_pass32(x, one)
        K.moments_of(x.astype(np.float64), two)  # the float64 path: two passes
        columns = [MIN, MAX, ZEROS, NANS, INFS, FINITE]
        assert one[columns].tobytes() == two[columns].tobytes(), size


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("where", [0, M.BLOCK + 3, 3 * M.BLOCK - 1])
def test_non_finite_values_go_to_the_careful_passes(bad, where):
    x = np.linspace(-1, 1, 3 * M.BLOCK, dtype=np.float32)
    x[where] = bad
    row = np.zeros(MOMENT_COLUMNS)
    assert not M.one_pass32(x, row)
    assert not row.any()  # untouched
    K.moments_of(x, row)  # float32: one_pass32 first, then the careful passes
    assert (row[NANS], row[INFS]) == ((1, 0) if np.isnan(bad) else (0, 1))
    got, expected = figures(row, x.size), reference(x)
    for field in ("norm", "mean", "std", "min", "max"):
        assert math.isclose(got[field], expected[field], rel_tol=1e-12, abs_tol=1e-14), field


def test_moments_of_a_float32_gradient_is_the_one_pass_row():
    # its shift is the mean itself (DSUM 0), not the midrange the two-pass path shifts by
    x = np.random.default_rng(3).standard_normal(10 * M.BLOCK + 9).astype(np.float32) + 40.0
    one, row, two = (np.zeros(MOMENT_COLUMNS) for _ in range(3))
    M.one_pass32(x, one)
    K.moments_of(x, row)
    K.moments_of(x.astype(np.float64), two)
    assert row[DSUM] == 0.0 and row[SHIFT] == pytest.approx(x.astype(np.float64).mean(), rel=1e-15)
    assert two[DSUM] != 0.0 and two[SHIFT] == (two[MIN] + two[MAX]) / 2
    np.testing.assert_allclose(row, one, rtol=1e-15, atol=0)  # the same kernel, compiled inline


def test_the_workers_copy_and_moments_in_one_pass_equal_the_copy_and_its_moments():
    # numba.worker's pass: every tensor copied, its row compute_at's of the copy bit for bit,
    # on hostile data: NaN/Inf in a later block (the copy still whole), mean ≫ std, size 1,
    # empty, float64
    import torch

    from gradexplorer.core.stats.backends.numba import in_place as BA

    rng = np.random.default_rng(11)
    nan_late = rng.standard_normal(3 * M.BLOCK).astype(np.float32)
    nan_late[2 * M.BLOCK + 5] = np.nan
    inf_first = np.linspace(-1, 1, M.BLOCK + 7, dtype=np.float32)
    inf_first[0] = -np.inf
    float32 = [*hostile(rng), nan_late, inf_first, np.zeros(0, np.float32)]
    float64 = [rng.standard_normal(M.BLOCK + 1) + 1e6, np.array([np.inf, 1.0]), np.array([2.5])]
    for arrays in (float32, float64):
        at = BA.addresses_of([torch.from_numpy(a) for a in arrays])
        buffer = BA.FlatBuffer()
        buffer.fit(at)
        buffer.flat[:] = 7.0  # not a copy yet
        rows = BA.copy_and_moments_at(at, buffer.starts, buffer.flat)
        assert buffer.flat.tobytes() == np.concatenate(arrays).tobytes()
        assert rows.tobytes() == BA.compute_at(at, False, 64, "auto").moments.tobytes()
    assert rows[1, INFS] == 1  # float64's Inf counted (the float32 rows: compute_at's above)
