"""The per-parameter figures built by one Numba call (kernels_rows) equal, bit for bit, the
numpy column-by-column build they replace, on the moments of real and awkward gradients."""

import math

import numpy as np
import pytest
import torch
from degenerate_grads import MAGNITUDES, _values

from gradexplorer.core.stats.backends import step_arrays as R
from gradexplorer.core.stats.backends.numba import cpu as backend_cpu
from gradexplorer.core.stats.records import ParamStats


def awkward_gradients() -> list[torch.Tensor]:
    grads = [torch.from_numpy(v) for m in MAGNITUDES for v in _values(m).values()]
    grads += [torch.tensor([math.nan, 1.0, -2.0]), torch.tensor([math.inf, -math.inf]),
              torch.tensor([math.nan, math.nan]), torch.zeros(5), torch.zeros(0),
              torch.randn(300, 7, generator=torch.Generator().manual_seed(0)) * 1e-3 + 5.0]
    return grads


def same(a: ParamStats, b: ParamStats) -> bool:
    """Every field equal, NaN to NaN, and the same sign of zero."""
    for key, x in vars(a).items():
        y = getattr(b, key)
        if isinstance(x, float) and isinstance(y, float):
            both_nan = math.isnan(x) and math.isnan(y)
            if not both_nan and (x != y or math.copysign(1, x) != math.copysign(1, y)):
                return False
        elif x != y or type(x) is not type(y):
            return False
    return True


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("with_update", [False, True])
def test_kernel_rows_equal_numpy_rows_bit_for_bit(dtype, with_update):
    grads = [g.to(dtype) for g in awkward_gradients()]
    raw = backend_cpu.compute(grads, False, 16, "auto")
    if with_update:
        rng = np.random.default_rng(1)
        update = rng.random((len(grads), 2))
        update[::5, 1] = 0.0  # θ was 0: Inf or 0
        update[::10, 0] = 0.0
        update[3, 0], update[4, 1] = np.nan, np.nan
        raw.update = update
    shapes = [(f"p{i}", tuple(g.shape)) for i, g in enumerate(grads)]
    assert R._row_kernel(), "the Numba row kernel should load here"
    fast, slow = R._stats_rows(shapes, raw), R._stats_rows_numpy(shapes, raw)
    assert len(fast) == len(slow) == len(grads)
    assert [n for n, (a, b) in enumerate(zip(fast, slow, strict=True)) if not same(a, b)] == []
    assert any(s.nan_count for s in fast) and any(s.inf_count for s in fast)
    assert (fast[0].update_ratio is None) is (not with_update)
