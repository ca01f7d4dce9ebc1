"""The update ratio's norms after the optimizer step shared with the statistics worker: on
a model of ``SHARED_MIN`` weights or more, half of them (by size) measured on the worker while
the training thread measures the other half — the same figures bit for bit as on one thread,
equal to a float64 computation; below it, or without a worker, one thread does all."""

import os
import threading

import numpy as np
import pytest
import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.core.stats.backends.numba import in_place as BA
from gradexplorer.core.stats.backends.numba import worker as W

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2,
                                reason="the worker is used only with a core to spare")


def on_the_worker(taken: list):
    """A helper as ``OffloadedStats.then``: each job run on the worker thread, done before it
    is handed back (the name of the thread that ran it noted in ``taken``)."""
    def helper(job):
        work = W.PendingWork(lambda: (taken.append(threading.current_thread().name), job())[1])
        W._pool().submit(work.run).result()
        return work
    return helper


def test_half_the_update_norms_are_measured_on_the_worker_bit_for_bit(one_thread):
    torch.manual_seed(0)
    params = [torch.randn(700, 1000), torch.randn(600, 1000), torch.randn(3000)]
    assert sum(p.numel() for p in params) >= BA.SHARED_MIN
    before = [p.clone() for p in params]
    copies = BA.UpdateCopies()
    copies.take(params)
    for p in params:
        p.add_(torch.randn(p.shape) * 1e-3)
    taken: list = []
    shared = copies.update_norms(params, on_the_worker(taken))
    alone = copies.update_norms(params)
    assert len(taken) == 1 and taken[0].startswith("gradexplorer-stats")
    assert shared.tobytes() == alone.tobytes()
    expected = [v for a, b in zip(params, before, strict=True)
                for v in ((a.double() - b.double()).norm().item(), b.double().norm().item())]
    assert shared.ravel().tolist() == pytest.approx(expected, rel=1e-12)


def test_a_small_model_or_no_worker_measures_on_one_thread(one_thread):
    params = [torch.randn(100, 100), torch.randn(100)]
    copies = BA.UpdateCopies()
    copies.take(params)
    taken: list = []
    found = copies.update_norms(params, on_the_worker(taken))
    assert not taken and found.shape == (2, 2)  # too few weights to be worth a hand-off
    big = [torch.randn(BA.SHARED_MIN // 2), torch.randn(BA.SHARED_MIN // 2)]
    copies.take(big)
    assert copies.update_norms(big, lambda job: None).shape == (2, 2)  # no step under way there


def watched_ratios(offload: bool, shared: list) -> list[dict]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 64))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    real = W.OffloadedStats.then
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(W.OffloadedStats, "then", lambda self, job: shared.append(job) or real(self, job))
        with gx.watch(model, opt) as rec:
            rec.monitor.offload = offload
            for step in range(3):
                g = torch.Generator().manual_seed(step)
                opt.zero_grad()
                nn.functional.cross_entropy(model(torch.randn(16, 1024, generator=g)),
                                            torch.randint(0, 64, (16,), generator=g)).backward()
                opt.step()
            return [r.column("update_ratio") for r in rec.monitor.history]


def test_watch_shares_the_update_norms_with_its_worker_and_records_the_same_ratios(one_thread):
    shared: list = []
    offloaded = watched_ratios(True, shared)
    assert len(shared) == 3  # every step's update norms shared with the worker
    alone: list = []
    here = watched_ratios(False, alone)
    assert not alone
    assert len(offloaded) == 3 and all(r.keys() == h.keys() for r, h in zip(offloaded, here, strict=True))
    for r, h in zip(offloaded, here, strict=True):
        assert [np.float64(v).tobytes() for v in r.values()] == [np.float64(v).tobytes() for v in h.values()]
        assert all(v > 0 for v in r.values())
