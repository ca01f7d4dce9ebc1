"""A step's histograms read from a run are checked all at once (numpy) when every row holds
the same bin count; the result equals the row-by-row check, and any row that fails a check
sends the step back to the row-by-row check that names it."""

from __future__ import annotations

import struct

import numpy as np
import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.core.recorder import validate as V

QUERY = "SELECT name, edges, counts, nan_count, inf_count, below, above FROM histograms WHERE step = ?"


def test_block_check_equals_the_row_check_and_steps_aside_for_a_bad_row(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gx.watch(model, opt, tmp_path / "run", bins=16):
        for _ in range(2):
            opt.zero_grad()
            model(torch.randn(8, 4)).square().mean().backward()
            opt.step()
    run = gx.open_run(tmp_path / "run")
    rows = run._rows(QUERY, (2,))
    block = V.histogram_block(rows)
    assert block is not None and [b[0] for b in block] == [r[0] for r in rows]
    for (name, edges, counts, *extras), row in zip(block, rows, strict=True):
        e, c, *x = V.histogram_arrays(row[1], row[2], tuple(row[3:]), name)
        assert np.array_equal(edges, e) and np.array_equal(counts, c) and list(extras) == x
        assert edges.dtype == np.float64 and counts.dtype == np.int64
    negative = rows[1][2][:-8] + struct.pack("<q", -1)
    assert V.histogram_block([rows[0], (rows[1][0], rows[1][1], negative, *rows[1][3:])]) is None
    shorter = (rows[1][0], rows[1][1][:-8], rows[1][2][:-8], *rows[1][3:])
    assert V.histogram_block([rows[0], shorter]) is None  # another bin count: row by row
    hist = run.histograms(2)
    assert list(hist) == [r[0] for r in rows]
    run.close()
