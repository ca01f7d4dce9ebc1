"""A monitor's StepGradients keeps the step's figures as arrays: ParamStats and Histograms are
built the first time they are read, and the column accessors give the same figures as the
built ParamStats, with and without parameters lacking a gradient."""

import dataclasses
import math
import pickle

import torch
from torch import nn

from gradexplorer.core.stats.monitor import GradientMonitor, _named
from gradexplorer.core.stats.records import STAT_FIELDS, StepGradients


def _record(drop_grad: bool, nan: bool):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3), nn.Linear(3, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.randn(7, 6)).square().sum().backward()
    if drop_grad:
        model[3].weight.grad = None
    if nan:
        model[0].bias.grad[1] = math.nan
        model[2].weight.grad[0, 0] = math.inf
    monitor = GradientMonitor(bins=8)
    monitor.begin(_named(model), opt, 1)
    opt.step()
    return monitor.finish(opt, 1)


def _same(a, b) -> bool:
    return repr(a) == repr(b)  # NaN as NaN, None as None, ints as ints


def test_columns_equal_the_built_param_stats():
    for drop_grad in (False, True):
        for nan in (False, True):
            record = _record(drop_grad, nan)
            assert "_params" in record.__dict__ and record.__dict__["_params"] is None  # not built
            names, columns = record.columns(*STAT_FIELDS)
            single = {f: record.column(f) for f in STAT_FIELDS}
            totals = record.nonfinite_totals()
            block = record.histogram_block()
            assert record.__dict__["_histograms"] is None
            assert record.__dict__["_params"] is None  # the accessors read the arrays
            built = record.params  # built now
            plain = StepGradients(record.step, record.global_norm, record.total_numel,
                                  dict(built), dict(record.histograms), record.bins,
                                  record.hist_range, record.seconds)
            assert names == list(built) == plain.columns()[0]
            assert _same(columns, plain.columns(*STAT_FIELDS)[1])
            assert all(_same(single[f], plain.column(f)) for f in STAT_FIELDS)
            assert totals == plain.nonfinite_totals() == ((1, 1) if nan else (0, 0))
            (names_h, edges, counts, extra), = block
            (plain_names, *plain_arrays), = plain.histogram_block()
            assert names_h == plain_names and len(names_h) == (5 if drop_grad else 6)
            for got, want in zip((edges, counts, extra), plain_arrays, strict=True):
                assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
            assert extra[:, :2].sum(0).tolist() == ([1, 1] if nan else [0, 0])  # NaN, Inf first
            assert record == plain and plain == record
            assert (built["3.weight"].has_grad is False) is drop_grad
            assert set(record.histograms) == {n for n, s in built.items() if s.has_grad}


def test_a_built_record_is_read_as_built_pickled_and_replaced():
    record = _record(True, False)
    record.params["0.weight"].norm = 123.0  # a reader's change is what later reads see
    assert record.column("norm")["0.weight"] == 123.0
    assert record.columns("norm")[1][0][0] == 123.0
    copy = pickle.loads(pickle.dumps(record))
    assert copy.params["0.weight"].norm == 123.0 and list(copy.params) == list(record.params)
    moved = dataclasses.replace(record, step=9)
    assert moved.step == 9 and moved.column("norm") == record.column("norm")
