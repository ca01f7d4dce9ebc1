"""A step's histograms read from a run are checked all at once (numpy) when every row holds
the same bin count; the result equals the row-by-row check, and any row that fails a check
sends the step back to the row-by-row check that names it (runs of format 3 and of format 2)."""

from __future__ import annotations

import struct

import numpy as np
import pytest
import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.core.runs import histogram_rows as H
from tests.legacy_runs import legacy_run

QUERY = "SELECT name, edges, counts, nan_count, inf_count, below, above FROM histograms WHERE step = ?"


@pytest.mark.parametrize("version", [3, 2])
def test_block_check_equals_the_row_check_and_steps_aside_for_a_bad_row(tmp_path, version):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    path = tmp_path / "run" if version == 3 else legacy_run(tmp_path / "run")
    with gx.watch(model, opt, path, bins=16, resume=version == 2):
        for _ in range(2):
            opt.zero_grad()
            model(torch.randn(8, 4)).square().mean().backward()
            opt.step()
    run = gx.open_run(tmp_path / "run")
    assert run.version == version
    rows = run._rows(QUERY, (2,))
    block = H.decode_block(rows, version)
    assert block is not None and [b[0] for b in block] == [r[0] for r in rows]
    for (name, edges, counts, *extras), row in zip(block, rows, strict=True):
        e, c, *x = H.decode(row[1], row[2], tuple(row[3:]), version, name)
        assert np.array_equal(edges, e) and np.array_equal(counts, c) and list(extras) == x
        assert edges.dtype == np.float64 and counts.dtype == np.int64
    if version == 2:
        bad = rows[1][2][:-8] + struct.pack("<q", -1)  # a negative count
        e, c = np.frombuffer(rows[1][1][:-8], "<f8"), np.frombuffer(rows[1][2][:-8], "<i8")
    else:
        bad = rows[1][2][:-1]  # a count cut short
        e, c = H.decode(*rows[1][1:3], (0, 0, 0, 0), version, "here")[:2]
        e, c = H.encode(e[:-1], c[:-1])
    assert H.decode_block([rows[0], (rows[1][0], rows[1][1], bad, *rows[1][3:])], version) is None
    shorter = (rows[1][0], e.tobytes() if version == 2 else e,
               c.tobytes() if version == 2 else c, *rows[1][3:])
    assert H.decode_block([rows[0], shorter], version) is None  # another bin count: row by row
    hist = run.histograms(2)
    assert list(hist) == [r[0] for r in rows]
    run.close()
