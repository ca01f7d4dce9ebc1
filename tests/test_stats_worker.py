"""The step's statistics computed on the worker thread (stats_worker) during the optimizer
step: taken where a core is spare and the step is big enough, the same figures bit for bit as
on the training thread, one step in flight at most, and a failure there handled as any other."""

import threading
import warnings

import pytest
import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.core.stats import backend_at as BA
from gradexplorer.core.stats import stats_worker as W
from gradexplorer.core.stats.histogram import parse_hist_range

pytestmark = pytest.mark.skipif(len(__import__("os").sched_getaffinity(0)) < 2,
                                reason="the worker is used only with a core to spare")


@pytest.fixture(autouse=True)
def enabled(monkeypatch):
    """The worker is opt-in (GRADEXPLORER_STATS_WORKER=1): these tests turn it on."""
    monkeypatch.setattr(W, "ENABLED", True)


def test_the_worker_is_off_unless_asked_for(monkeypatch, one_thread):
    big = BA.addresses_of([torch.zeros(W.OFFLOAD_MIN)])
    monkeypatch.setattr(W, "ENABLED", False)
    assert not W.worth_offloading(big)


def mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1))


def watched_steps(monkeypatch, offload: bool, steps: int = 3):
    monkeypatch.setattr(W, "worth_offloading", lambda at, real=W.worth_offloading: offload and real(at))
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    records = []
    with gx.watch(model, opt) as rec:
        for step in range(steps):
            g = torch.Generator().manual_seed(step)
            opt.zero_grad()
            x, y = torch.randn(32, 256, generator=g), torch.randn(32, 1, generator=g)
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            records.append(rec.latest())
    return records


def test_a_big_step_goes_to_the_worker_with_the_same_figures_bit_for_bit(monkeypatch, one_thread):
    submitted = []
    real = W.OffloadedStats.submit

    def spy(self, *args, **kwargs):
        submitted.append(args[0])
        return real(self, *args, **kwargs)

    monkeypatch.setattr(W.OffloadedStats, "submit", spy)
    offloaded = watched_steps(monkeypatch, True)
    assert len(submitted) == 3  # every step handed over (computed there, or here if not started)
    submitted.clear()
    here = watched_steps(monkeypatch, False)
    assert not submitted
    for a, b in zip(offloaded, here, strict=True):
        assert not a.not_recorded
        assert a.params == b.params  # every figure, the update ratio included
        for name, h in a.histograms.items():
            assert h.counts.tobytes() == b.histograms[name].counts.tobytes()
            assert h.edges.tobytes() == b.histograms[name].edges.tobytes()


def test_the_worker_thread_computes_what_it_has_started(monkeypatch):
    threads = []
    real = BA.compute_at

    def spy(*args, **kwargs):
        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(BA, "compute_at", spy)
    offloaded = W.OffloadedStats()
    offloaded.submit(BA.addresses_of([torch.randn(W.OFFLOAD_MIN)]), True, 64, parse_hist_range("auto"))
    offloaded._future.exception()  # waits until the worker has done it
    assert offloaded.result().counts.sum() == W.OFFLOAD_MIN
    assert len(threads) == 1 and threads[0].startswith("gradexplorer-stats")


def test_worth_offloading_only_with_a_spare_core_and_enough_values(one_thread):
    big = BA.addresses_of([torch.zeros(W.OFFLOAD_MIN)])
    small = BA.addresses_of([torch.zeros(W.OFFLOAD_MIN - 1)])
    assert W.worth_offloading(big) and not W.worth_offloading(small)
    torch.set_num_threads(len(__import__("os").sched_getaffinity(0)))
    assert not W.worth_offloading(big)  # torch's threads use every core


def test_a_second_submit_waits_for_the_first_and_its_result_is_the_second_step():
    hist_range = parse_hist_range("auto")
    offloaded = W.OffloadedStats()
    first, second = torch.randn(W.OFFLOAD_MIN), torch.randn(W.OFFLOAD_MIN) * 3
    offloaded.submit(BA.addresses_of([first]), True, 64, hist_range)
    offloaded.submit(BA.addresses_of([second]), True, 64, hist_range)  # the buffer is reused
    expected = BA.compute_at(BA.addresses_of([second]), True, 64, hist_range)
    got = offloaded.result()
    assert got.moments.tobytes() == expected.moments.tobytes()
    assert got.counts.tobytes() == expected.counts.tobytes()
    with pytest.raises(RuntimeError):
        offloaded.result()  # taken once


def test_a_failure_of_the_statistics_is_one_warning_and_training_goes_on(monkeypatch, one_thread):
    real = W.OffloadedStats.result

    def fails(self):
        real(self)
        raise RuntimeError("worker broke")

    monkeypatch.setattr(W.OffloadedStats, "result", fails)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records = watched_steps(monkeypatch, True)
    assert len(records) == 3 and all(r is not None for r in records)
    assert all(r.params for r in records)  # measured again one by one, on the training thread
    assert any("worker broke" in str(w.message) for w in caught)


def test_statistics_the_worker_has_not_started_are_computed_by_the_caller():
    hist_range = parse_hist_range("auto")
    threads = []
    real = BA.compute_at

    def spy(*args, **kwargs):
        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    busy, release = threading.Event(), threading.Event()
    W._pool().submit(lambda: (busy.set(), release.wait(30)))  # the worker is taken (no core free)
    busy.wait(30)
    try:
        offloaded = W.OffloadedStats()
        values = torch.randn(W.OFFLOAD_MIN)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(BA, "compute_at", spy)
            offloaded.submit(BA.addresses_of([values]), True, 64, hist_range)
            got = offloaded.result()  # not waited for: computed here from the copy
    finally:
        release.set()
    assert threads == [threading.current_thread().name]
    expected = real(BA.addresses_of([values]), True, 64, hist_range)
    assert got.moments.tobytes() == expected.moments.tobytes()
    assert got.counts.tobytes() == expected.counts.tobytes()



def test_a_forked_child_forgets_the_parents_worker():
    parent = W._pool()
    W._forget_pool()  # what os.register_at_fork runs in a child: the parent's thread is not there
    try:
        child = W._pool()
        assert child is not parent
        offloaded = W.OffloadedStats()
        offloaded.submit(BA.addresses_of([torch.ones(W.OFFLOAD_MIN)]), True, 8, parse_hist_range("auto"))
        assert offloaded.result().counts.sum() == W.OFFLOAD_MIN
    finally:
        W._POOL.shutdown()
        W._POOL = parent
