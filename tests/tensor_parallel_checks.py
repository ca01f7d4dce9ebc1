"""What the gloo tests of tensor parallelism check: every figure and histogram of a run recorded
on the ranks equals a one-process run's (tests/test_watch_tensor_parallel.py,
tests/test_callbacks_tensor_parallel.py)."""

import json
import socket

import numpy as np
import pytest
from tensor_parallel_helpers import MAX_NORM, STEPS

import gradexplorer as gx
from gradexplorer.core.runs.schema import PARAM_STEP_FIELDS

NAMES = ["norm.weight", "norm.bias", "q.weight", "q.bias", "k.weight", "v.weight",
         "v.bias", "o.weight", "o.bias", "mlp_norm.weight", "mlp_norm.bias", "up.weight",
         "up.bias", "down.weight", "down.bias"]
OPTIMIZER_STATE = set(PARAM_STEP_FIELDS) - {"grad_norm_accumulated"}  # sharded: not recorded


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def opened(path):
    return gx.open_run(path), json.loads(path.with_name(f"{path.name}.totals.json").read_text())


def same_as_one_process(mine, reference, world, accumulated=True):
    (run, totals), (want_run, want_totals) = mine, reference
    skipped = OPTIMIZER_STATE | ({"grad_norm_accumulated"} if not accumulated else set())
    assert run.steps == want_run.steps == list(range(1, STEPS + 1))
    assert totals == pytest.approx(want_totals, rel=1e-12)
    for step in run.steps:
        got, want = run.figures(step), want_run.figures(step)
        assert list(got) == list(want) == NAMES
        for name in NAMES:
            for field, value in want[name].items():
                if field in skipped:
                    assert field not in OPTIMIZER_STATE or got[name][field] is None, (name, field)
                elif value is None:
                    assert got[name][field] is None, (step, name, field)
                else:
                    assert got[name][field] == pytest.approx(value, rel=1e-9, abs=1e-15), \
                        (step, name, field)
            edges, counts = run.histogram(step, name)
            ref_edges, ref_counts = want_run.histogram(step, name)
            np.testing.assert_allclose(edges, ref_edges, rtol=1e-12)
            np.testing.assert_array_equal(counts, ref_counts)
        info = run.step_info(step)
        assert info["ranks"] == world
        assert info["global_norm"] == pytest.approx(want_run.step_info(step)["global_norm"],
                                                    rel=1e-12)
        if not accumulated:
            continue
        # the as-accumulated point is what clip_grad_norm_ measured, the coefficient its own
        assert info["grad_norm_accumulated"] == pytest.approx(totals[step - 1], rel=1e-12)
        assert info["clip_coef"] == pytest.approx(MAX_NORM / (totals[step - 1] + 1e-6), rel=1e-9)
        assert info["clipped"] and info["global_norm"] == pytest.approx(
            MAX_NORM * totals[step - 1] / (totals[step - 1] + 1e-6), rel=1e-9)
        assert info["grad_norm_applied"] == info["global_norm"]
