"""watch's statistics on the worker thread (stats_worker): the gradients copied at the
optimizer's pre-hook, their moments during the optimizer step and their histograms after it —
the same figures bit for bit as on the training thread, whatever the loop does to ``.grad``
afterwards, nothing waited for that the worker has not started, one step in flight at most, and
a failure there handled as any other."""

import copy
import os
import pickle
import threading
import warnings
from dataclasses import astuple

import numpy as np
import pytest
import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.core.stats.backends.numba import in_place as BA
from gradexplorer.core.stats.backends.numba import worker as W
from gradexplorer.core.stats.histogram import parse_hist_range

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2,
                                reason="the worker is used only with a core to spare")


def mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1))


def watched_steps(offload: bool, steps: int = 4, run_dir=None, set_to_none: bool = True,
                  poison: int | None = None):
    """``steps`` watched SGD steps; the records read only after the loop (the histograms of
    the worker's steps still under way until then). ``set_to_none=False``: zero_grad and the
    next backward change the recorded gradients in place; ``poison``: that step's gradient
    holds a NaN and an Inf."""
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    with gx.watch(model, opt, run_dir) as rec:
        rec.monitor.offload = offload
        for step in range(steps):
            g = torch.Generator().manual_seed(step)
            opt.zero_grad(set_to_none=set_to_none)
            x, y = torch.randn(32, 256, generator=g), torch.randn(32, 1, generator=g)
            nn.functional.mse_loss(model(x), y).backward()
            if step == poison:
                model[0].weight.grad[0, :2] = torch.tensor([float("nan"), float("inf")])
            opt.step()
        records = list(rec.monitor.history)
        assert rec.monitor.backend == "numba"
    return records


def bits(value):
    """A figure as compared bit for bit (NaN equal to NaN)."""
    return np.float64(value).tobytes() if isinstance(value, float) else value


def same_figures(a, b) -> None:
    assert [r.step for r in a] == [r.step for r in b]
    for x, y in zip(a, b, strict=True):
        assert not x.not_recorded and not y.not_recorded
        assert x.params.keys() == y.params.keys()
        for name, stats in x.params.items():  # every figure, the update ratio included; NaN = NaN
            assert [bits(f) for f in astuple(stats)] == [bits(f) for f in astuple(y.params[name])]
        assert x.histograms.keys() == y.histograms.keys() and x.histograms
        for name, h in x.histograms.items():
            other = y.histograms[name]
            assert h.counts.tobytes() == other.counts.tobytes()
            assert h.edges.tobytes() == other.edges.tobytes()
            assert (h.nan_count, h.inf_count, h.below, h.above) == \
                (other.nan_count, other.inf_count, other.below, other.above)


def test_the_worker_takes_watchs_steps_with_the_same_figures_bit_for_bit(one_thread):
    seen = []
    real = W.OffloadedStats.submit

    def spy(self, *args, **kwargs):
        seen.append(args[0])
        return real(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(W.OffloadedStats, "submit", spy)
        offloaded = watched_steps(True, poison=2)
        assert len(seen) == 4  # every step handed over
        seen.clear()
        here = watched_steps(False, poison=2)
        assert not seen
    assert offloaded[2].params["0.weight"].nan_count == 1
    same_figures(offloaded, here)


def test_gradients_changed_in_place_after_the_step_do_not_change_its_figures(one_thread):
    """zero_grad(set_to_none=False) zeroes the recorded gradients in place and the next
    backward accumulates into them while the worker may still be reading: it reads its copy."""
    same_figures(watched_steps(True, set_to_none=False), watched_steps(False, set_to_none=False))


def test_the_run_directory_holds_the_workers_histograms(tmp_path, one_thread):
    watched_steps(True, run_dir=tmp_path / "a")
    watched_steps(False, run_dir=tmp_path / "b")
    a, b = gx.open_run(tmp_path / "a"), gx.open_run(tmp_path / "b")
    try:
        assert a.steps == b.steps == [1, 2, 3, 4]
        for step in a.steps:
            ha, hb = a.histograms(step), b.histograms(step)
            assert ha.keys() == hb.keys() and ha
            for name in ha:
                assert ha[name].counts.tobytes() == hb[name].counts.tobytes()
                assert ha[name].edges.tobytes() == hb[name].edges.tobytes()
    finally:
        a.close()
        b.close()


def test_the_worker_thread_copies_and_computes_what_it_has_started():
    threads = []
    real = BA.copy_and_moments_at

    def spy(*args, **kwargs):
        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    values = torch.randn(W.OFFLOAD_MIN)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(BA, "copy_and_moments_at", spy)
        offloaded = W.OffloadedStats()
        _, moments = offloaded.submit(BA.addresses_of([values]), True, 64, parse_hist_range("auto"))
        W._pool().submit(lambda: None).result()  # the worker has done all it was given (FIFO)
        values.zero_()  # the gradient changes once copied: the figures are the copy's
    raw = moments.result()
    assert threads and all(t.startswith("gradexplorer-stats") for t in threads)
    assert raw.pending is not None  # computed, not yet read
    edges, counts, _ = raw.histogram_arrays()
    assert counts.sum() == W.OFFLOAD_MIN and raw.moments[0, 0] < 0  # the min of the random values
    assert raw.pending is None


def test_work_the_worker_has_not_started_is_done_by_the_thread_that_needs_it():
    hist_range = parse_hist_range("auto")
    threads = []
    real = BA.copy_and_moments_at

    def spy(*args, **kwargs):
        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    busy, release = threading.Event(), threading.Event()
    W._pool().submit(lambda: (busy.set(), release.wait(30)))  # the worker is taken (no core free)
    busy.wait(30)
    values = torch.randn(W.OFFLOAD_MIN)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(BA, "copy_and_moments_at", spy)
            copied, moments = W.OffloadedStats().submit(BA.addresses_of([values]), True, 64, hist_range)
            copied.result()  # not waited for: copied here
            raw = moments.result()  # computed here from the copy
            found = raw.histogram_arrays()
    finally:
        release.set()
    assert threads == [threading.current_thread().name]
    expected = BA.compute_at(BA.addresses_of([values]), True, 64, hist_range)
    assert raw.moments.tobytes() == expected.moments.tobytes()
    assert found[1].tobytes() == expected.counts.tobytes()


def test_a_second_submit_has_the_first_done_and_reuses_its_copy():
    hist_range = parse_hist_range("auto")
    offloaded = W.OffloadedStats()
    first, second = torch.randn(W.OFFLOAD_MIN), torch.randn(W.OFFLOAD_MIN) * 3
    _, one = offloaded.submit(BA.addresses_of([first]), True, 64, hist_range)
    _, two = offloaded.submit(BA.addresses_of([second]), True, 64, hist_range)  # the buffer reused
    for values, pending in ((first, one), (second, two)):
        expected = BA.compute_at(BA.addresses_of([values]), True, 64, hist_range)
        raw = pending.result()
        assert raw.moments.tobytes() == expected.moments.tobytes()
        assert raw.histogram_arrays()[1].tobytes() == expected.counts.tobytes()


def test_worth_offloading_only_with_a_spare_core_and_enough_values(one_thread, monkeypatch):
    big = BA.addresses_of([torch.zeros(W.OFFLOAD_MIN)])
    small = BA.addresses_of([torch.zeros(W.OFFLOAD_MIN - 1)])
    assert W.worth_offloading(big) and not W.worth_offloading(small)
    monkeypatch.setattr(W, "OFFLOAD_MAX", W.OFFLOAD_MIN - 1)
    assert not W.worth_offloading(big)  # too big to copy
    monkeypatch.undo()
    monkeypatch.setattr(W, "ENABLED", False)  # GRADEXPLORER_STATS_WORKER=0
    assert not W.worth_offloading(big)
    monkeypatch.undo()
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    assert not W.worth_offloading(big)  # torch's threads use every core


def test_only_watch_offloads(one_thread):
    model = mlp()
    monitor = gx.session.GradientMonitor()
    assert not monitor.offload
    with gx.watch(model, torch.optim.SGD(model.parameters(), lr=0.1)) as rec:
        assert rec.monitor.offload


def test_a_failure_of_the_workers_histograms_is_one_warning_and_training_goes_on(monkeypatch, one_thread):
    def broken(*args, **kwargs):
        raise RuntimeError("worker broke")

    monkeypatch.setattr(W.C, "pack_histograms", broken)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records = watched_steps(True)
        assert all(r.histograms == {} for r in records)
    assert all(r.params and r.global_norm > 0 for r in records)  # the moments are whole
    assert sum("worker broke" in str(w.message) for w in caught) == 1  # one warning per cause


def test_a_failure_of_the_workers_moments_is_measured_again_on_the_training_thread(monkeypatch, one_thread):
    real = BA.compute_at

    def broken(at, *args, **kwargs):
        if isinstance(at.tensors[0], np.ndarray):  # the worker's copy (on whichever thread)
            raise RuntimeError("worker broke")
        return real(at, *args, **kwargs)

    def broken_with_the_copy(*args, **kwargs):
        raise RuntimeError("worker broke")

    monkeypatch.setattr(BA, "compute_at", broken)
    monkeypatch.setattr(BA, "copy_and_moments_at", broken_with_the_copy)  # then copied alone
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records = watched_steps(True)
    assert len(records) == 4 and all(r.params for r in records)  # one by one, after the step
    assert any("worker broke" in str(w.message) for w in caught)


def test_a_record_copied_or_pickled_takes_its_histograms_along(one_thread):
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gx.watch(model, opt) as rec:
        nn.functional.mse_loss(model(torch.randn(8, 256)), torch.randn(8, 1)).backward()
        opt.step()
        record = rec.monitor.history.latest()
        assert record._arrays[4].pending is not None or record._arrays[4].counts is not None
        for again in (copy.deepcopy(record), pickle.loads(pickle.dumps(record))):
            assert again.histograms.keys() == record.histograms.keys()
            for name, h in record.histograms.items():
                assert np.array_equal(again.histograms[name].counts, h.counts)


def test_a_forked_child_forgets_the_parents_worker():
    parent = W._pool()
    W._forget_pool()  # what os.register_at_fork runs in a child: the parent's thread is not there
    try:
        child = W._pool()
        assert child is not parent
        _, moments = W.OffloadedStats().submit(BA.addresses_of([torch.ones(W.OFFLOAD_MIN)]), True, 8,
                                               parse_hist_range("auto"))
        assert moments.result().histogram_arrays()[1].sum() == W.OFFLOAD_MIN
    finally:
        W._POOL.shutdown()
        W._POOL = parent


def adam_run(run_dir, offload: bool, stats_every: int = 1, drain: bool = False) -> None:
    """Adam with a learning rate the scheduler changes after every step, recorded into
    ``run_dir``; the optimizer state of each recorded step read on the worker or not (``drain``:
    the loop goes on once the worker has done what it was given: FIFO, one thread)."""
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    schedule = torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)
    with gx.watch(model, opt, run_dir, stats_every=stats_every) as rec:
        rec.monitor.offload = offload
        for step in range(5):
            g = torch.Generator().manual_seed(step)
            opt.zero_grad()
            x, y = torch.randn(32, 256, generator=g), torch.randn(32, 1, generator=g)
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            if drain:
                W._pool().submit(lambda: None).result()
            schedule.step()


@pytest.mark.parametrize("stats_every", [1, 2])
def test_the_optimizer_state_read_on_the_worker_is_the_steps(tmp_path, one_thread, stats_every):
    """The state after each recorded step at the learning rate it used, though the worker reads
    it after the scheduler has changed the rate (and, every 2 steps, before an unrecorded step
    changes the state: the pre-hook has it read first). Whoever asks first reads it: the
    worker, the run's writer thread where it asks before the worker got there (the writer
    wakes every ``write_thread.PERIOD``, while the worker may still be on the step's
    histograms), or the training thread where no core was free — the same state each time."""
    from gradexplorer.core.runs import write_thread as WT
    from gradexplorer.core.stats import optimizer_state as O

    threads, taken = [], threading.Semaphore(0)
    real, real_hist = O.optimizer_state, W.C.pack_histograms

    def spy(*args, **kwargs):
        threads.append(threading.current_thread().name)
        state = real(*args, **kwargs)
        if threads[-1] == "gradexplorer-run-writer":
            taken.release()
        return state

    def after_the_writers_read(*args, **kwargs):  # the worker on the histograms meanwhile
        assert taken.acquire(timeout=30), "the writer waited for the worker instead of reading"
        return real_hist(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(O, "optimizer_state", spy)
        patch.setattr(WT, "PERIOD", 3600)  # the writer asks at close only: after the worker
        adam_run(tmp_path / "a", True, stats_every, drain=True)
        assert threads and all(t.startswith("gradexplorer-stats") for t in threads)
        threads.clear()
        patch.setattr(WT, "PERIOD", 0.005)  # the writer asks while the worker is still busy
        patch.setattr(W.C, "pack_histograms", after_the_writers_read)
        adam_run(tmp_path / "d", True, stats_every)
        patch.setattr(W.C, "pack_histograms", real_hist)
        assert threads == ["gradexplorer-run-writer"] * len(stats_steps(stats_every))
        threads.clear()
        busy, release = threading.Event(), threading.Event()
        W._pool().submit(lambda: (busy.set(), release.wait(60)))  # no core free: nothing started
        busy.wait(30)
        try:
            adam_run(tmp_path / "c", True, stats_every)  # done where needed, never too late
        finally:
            release.set()
        assert threads and not any(t.startswith("gradexplorer-stats") for t in threads)
        threads.clear()
        adam_run(tmp_path / "b", False, stats_every)
        assert threads == [threading.current_thread().name] * len(threads)
    a, b, c, d = (gx.open_run(tmp_path / n) for n in "abcd")
    try:
        assert a.steps == b.steps == c.steps == d.steps == stats_steps(stats_every)
        for step in a.steps:
            sa, sb, sc, sd = (run.optimizer_state(step) for run in (a, b, c, d))
            assert sa == sb == sc == sd and sa["0.weight"].lr == 0.01 * 0.5 ** (step - 1)
            assert sa["0.weight"].exp_avg_sq_rms > 0 and sa["0.weight"].effective_lr > 0
    finally:
        for run in (a, b, c, d):
            run.close()


def stats_steps(stats_every: int) -> list[int]:
    """The steps ``adam_run`` records."""
    return list(range(stats_every, 6, stats_every))


@pytest.mark.parametrize("crowded", [False, True])
def test_a_crowded_machine_pauses_the_worker_and_it_is_tried_again(monkeypatch, one_thread, crowded):
    """The training thread losing its core (involuntary context switches: the worker and other
    processes share the cores) sends the next steps back to the training thread, then tries the
    worker again; the figures are the same either way."""
    switches = [0]  # the training thread's involuntary switches so far: one a step, or none
    asked = W.OffloadedStats.wanted

    def a_step(self):
        switches[0] += 1 if crowded else 0
        return asked(self)

    monkeypatch.setattr(W.OffloadedStats, "wanted", a_step)
    monkeypatch.setattr(W, "_preempted", lambda: switches[0])
    monkeypatch.setattr(W, "CROWDED_STEPS", 3)
    monkeypatch.setattr(W, "PAUSE_STEPS", 4)
    submitted = []
    real = W.OffloadedStats.submit

    def spy(self, at, *args, **kwargs):
        submitted.append(len(submitted))
        return real(self, at, *args, **kwargs)

    monkeypatch.setattr(W.OffloadedStats, "submit", spy)
    records = watched_steps(True, steps=12)
    # crowded: 3 steps offloaded, the 4th finds 1 switch a step and pauses 4, then again
    assert len(submitted) == (6 if crowded else 12)
    monkeypatch.setattr(W.OffloadedStats, "submit", real)
    same_figures(records, watched_steps(False, steps=12))
