"""Each parameter's noise figures (``core/watch/noise_params.py``) are made when first read, several
steps at once: the same arrays, bit for bit, as made one step at a time."""

import copy

import numpy as np
import torch
from test_noise_scale import B, K, Tied, data
from torch import nn

import gradexplorer as gx


def test_per_parameter_arrays_read_late_equal_those_read_at_each_step():
    """A step's per-parameter arrays are made when first read (noise_params.py): read only after
    the last step, several steps at once, they equal, bit for bit, those read at each step; a
    step missing a parameter's gradient among them (made one step at a time) included."""
    torch.manual_seed(10)
    base = Tied()
    got = {}
    for when in ("each step", "at the end"):
        model = copy.deepcopy(base)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        steps = []
        with gx.watch(model, opt, update_ratio=False, noise_every=1) as rec:
            for step in range(7):
                x, y = data(step)
                for i in range(K):  # side unused by every backward of step 3: not present
                    model.use_side = step != 3 and i % 2 == 0
                    (nn.functional.mse_loss(model(x[i * B:(i + 1) * B]), y[i * B:(i + 1) * B]) / K
                     ).backward()
                opt.step()
                opt.zero_grad()
                steps.append(rec.noise.latest)
                if when == "each step":
                    steps[-1].per["snr"]
        got[when] = steps
    assert "side.weight" not in got["at the end"][3].names
    got["at the end"][-1].per["snr"]  # the last step's first: the steps before it made with it
    for late, early in zip(got["at the end"], got["each step"], strict=True):
        assert late.names == early.names
        for column in late.per:
            np.testing.assert_array_equal(late.per[column], early.per[column], strict=True)
