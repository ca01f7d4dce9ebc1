"""GradientHistory(whole_run=True), the live session's: the whole run, evenly thinned, within
its bound; the first step is never dropped."""

from __future__ import annotations

import numpy as np
import pytest

from gradexplorer.core.model.spec import ModelOptions, load_workload
from gradexplorer.core.session.engine import SessionConfig, TrainingSession
from gradexplorer.core.stats.history import GradientHistory
from gradexplorer.core.stats.monitor import GradientMonitor

STEPS, BOUND = 2000, 256


@pytest.fixture(scope="module")
def records():
    """2,000 steps of example:mlp under a GradientMonitor (16 bins): each step's record."""
    session = TrainingSession(load_workload("example:mlp", ModelOptions(batch_size=8)),
                              SessionConfig(device="cpu"))
    session.add_observer(GradientMonitor(bins=16, history=1))
    return [session.step().gradients for _ in range(STEPS)]


def test_the_whole_run_is_kept_evenly_thinned_within_the_bound(records):
    history = GradientHistory(BOUND, whole_run=True)
    most = 0
    for record in records:
        history.append(record)
        most = max(most, len(history))
    assert most <= BOUND  # memory bound: never more than BOUND steps held
    stride = history.stride
    expected = sorted({r.step for r in records[::stride]} | {records[-2].step, records[-1].step})
    assert history.steps() == expected
    assert expected[0] == 1 and expected[-1] == STEPS
    assert len(records[::stride // 2]) + 1 > BOUND  # the stride is the least that fits
    name = next(iter(records[0].histograms))
    matrix = history.histogram_matrix(name)
    assert matrix.steps.tolist() == expected
    by_step = {r.step: r for r in records}
    for row, step in enumerate(expected):  # each column is its step's own histogram
        assert np.array_equal(matrix.counts[row], by_step[step].histograms[name].counts)
        assert np.array_equal(matrix.edges[row], by_step[step].histograms[name].edges)
    steps, norms = history.series(name, "norm")
    assert steps.tolist() == expected
    assert norms.tolist() == [by_step[s].params[name].norm for s in expected]


def test_a_ring_drops_the_beginning_and_clear_starts_over(records):
    ring = GradientHistory(BOUND)
    for record in records:
        ring.append(record)
    assert ring.steps() == [r.step for r in records[-BOUND:]]
    whole = GradientHistory(BOUND, whole_run=True)
    for record in records[:600]:
        whole.append(record)
    whole.clear()
    for record in records[:5]:
        whole.append(record)
    assert whole.steps() == [1, 2, 3, 4, 5] and whole.stride == 1
    with pytest.raises(ValueError):
        GradientHistory(3, whole_run=True)
