"""A step's gradient statistics computed on a worker thread while training goes on (``watch``).

Where torch leaves a core free, at the optimizer's pre-hook the worker copies the step's
gradients into one kept buffer and takes their moments in the same pass
(``numba.in_place.copy_and_moments_at``: each block's moments read from its copy in L1) while
the training thread copies the weights for the update ratio; the pre-hook returns once both
copies are taken, so the figures are those of the gradient at the pre-hook whatever the loop
does to ``.grad`` afterwards. From the copy the worker then takes the
histograms (``numba.cpu.pack_histograms``), which it computes during the next forward and
backward: the record holds them as ``PendingWork``, waited for by whoever reads them first (the
run directory's writer thread, the user). Work a caller adds with ``then`` (the run directory's
optimizer-state figures) follows, before the next step. The same kernels on the same values
with the same edges, so the same figures bit for bit; the Numba kernels run without the GIL.
A crowded machine pauses the worker (``CROWDED_SWITCHES``).

Nothing waits on a worker that has not started: each piece of work runs once, on the worker or
on the first thread that needs it (the training thread where no core was free). At most one
step is in flight: the next step's copy first has the previous step's work done; nothing is
dropped. The copy costs one buffer the size of the gradients, so steps of more than
``OFFLOAD_MAX`` values are measured on the training thread as before;
``GRADEXPLORER_STATS_WORKER=0`` turns the worker off.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import torch

from gradexplorer.core.stats.backends.numba import cpu as C
from gradexplorer.core.stats.backends.numba import in_place as BA
from gradexplorer.core.stats.backends.numba import kernels_in_place as KA
from gradexplorer.core.stats.backends.raw import RawStats
from gradexplorer.core.stats.histogram import HistRange

OFFLOAD_MIN = 1 << 16  # fewer values than this: computed on the training thread (no hand-off)
OFFLOAD_MAX = 1 << 26  # more than this (a 256 MB float32 copy): no copy, computed in place
ENABLED = os.environ.get("GRADEXPLORER_STATS_WORKER", "1") != "0"
_POOL: ThreadPoolExecutor | None = None
_LOCK = threading.Lock()
_CORES = len(os.sched_getaffinity(0))
# Where the other cores are busy (data-loader processes, other jobs), the worker takes the
# training thread's core from it: measured by the training thread's involuntary context
# switches (none a step on a machine with a core to spare, ~3 a step with the other core busy,
# on the 2-core machine). Where they reach CROWDED_SWITCHES a step over CROWDED_STEPS offloaded
# steps, the next PAUSE_STEPS steps are measured on the training thread, then the worker is
# tried again.
CROWDED_SWITCHES, CROWDED_STEPS, PAUSE_STEPS = 0.5, 32, 256
try:
    import resource

    _THREAD = resource.RUSAGE_THREAD  # Linux
except (ImportError, AttributeError):  # elsewhere: not measured, never paused
    _THREAD = None


def _preempted() -> int:
    """The calling thread's involuntary context switches so far (0 where not measured)."""
    return 0 if _THREAD is None else resource.getrusage(_THREAD).ru_nivcsw


def _forget_pool() -> None:
    """In a forked child: the parent's worker thread does not exist there; start afresh."""
    global _POOL, _LOCK
    _POOL, _LOCK = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool)


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(1, thread_name_prefix="gradexplorer-stats")
        return _POOL


def _hand_over(fn, *args) -> None:
    """``fn(*args)`` to the worker; where no thread can be started, left to the training
    thread (``PendingWork`` is done by whoever asks first), said once, and not offloaded again."""
    global ENABLED
    try:
        _pool().submit(fn, *args)
    except RuntimeError as exc:  # "can't start new thread" (a process or address-space limit)
        if ENABLED:
            ENABLED = False
            warnings.warn(f"gradexplorer: cannot start the statistics worker thread ({exc}); "
                          "computing statistics on the training thread", RuntimeWarning,
                          stacklevel=2)


def worth_offloading(at: BA.Addresses) -> bool:
    """Whether the worker takes this step's statistics: not turned off (``ENABLED``), torch
    leaves a core free (its threads fewer than the cores this process may use), the work is
    one kernel call's (not shared out among torch's threads), big enough to outweigh the
    hand-off and small enough for the copy (``OFFLOAD_MIN``, ``OFFLOAD_MAX`` values)."""
    return ENABLED and torch.get_num_threads() < _CORES \
        and OFFLOAD_MIN <= at.total <= OFFLOAD_MAX and len(BA.shares(at)) == 1


class PendingWork:
    """Work done once, by the worker or by whichever thread asks first (the others wait for
    it): ``result()`` its value, or its error raised."""

    def __init__(self, job) -> None:
        self._job = job
        self._lock = threading.Lock()
        self._done: tuple | None = None  # (True, value) or (False, exception)

    def run(self) -> tuple:
        if self._done is not None:
            return self._done
        with self._lock:
            if self._done is None:
                try:
                    done = (True, self._job())
                except Exception as exc:  # noqa: BLE001 - raised to whoever reads it
                    done = (False, exc)
                self._job = None  # what it read is no longer needed
                self._done = done
        return self._done

    def result(self):
        ok, value = self.run()
        if not ok:
            raise value
        return value


class OffloadedStats:
    """The gradients' copy (one kept flat buffer) and its statistics under way on the worker;
    ``cpu_seconds``: the worker's CPU spent on them so far (for the benchmark); ``paused``:
    steps left measured on the training thread (the machine was found crowded)."""

    def __init__(self) -> None:
        self.cpu_seconds = 0.0
        self.paused = 0
        self._window: tuple[int, int] | None = None  # (switches at its start, steps in it)
        self._buffer = BA.FlatBuffer()
        self._copy: BA.Addresses | None = None  # where the copy lies (kept with the buffer)
        self._last: tuple[PendingWork, PendingWork, list[PendingWork]] | None = None
        self._kept: list[PendingWork] = []  # ``keep``'s jobs, done by the next ``wait`` at the latest

    def submit(self, at: BA.Addresses, want_histograms: bool, bins: int,
               hist_range: HistRange) -> tuple[PendingWork, PendingWork]:
        """Start copying the tensors ``at`` and their statistics on the worker: ``(copy,
        moments)``; ``copy.result()`` must be waited for before the tensors may change,
        ``moments.result()`` is a RawStats whose histograms (``pending``) may still be under way."""
        self.wait()  # the previous step's work is done: its copy may be overwritten
        buffer = self._buffer
        if buffer.fit(at):  # a new buffer or layout (always the first time): where the copy lies
            self._copy = BA.Addresses(buffer.flat.ctypes.data + buffer.starts * buffer.flat.itemsize,
                                      at.sizes, at.like, [buffer.flat], at.total)  # held while read
        flat, starts, copy = buffer.flat, buffer.starts, self._copy
        copied = PendingWork(lambda: _copied(at, starts, flat))

        def moments() -> RawStats:
            found = copied.result()  # the moments taken with the copy, or None
            raw = RawStats(found) if found is not None else BA.compute_at(copy, False, bins, hist_range)
            if want_histograms and bins >= 1:
                edges, careful = BA.step_edges(raw.moments, bins, hist_range)
                raw.edges, raw.pending = edges, PendingWork(lambda: C.pack_histograms(
                    copy, raw.moments, bins, hist_range, edges, careful)[1:])
            return raw

        work = (copied, PendingWork(moments), [])
        self._last = work
        _hand_over(self._on_worker, _run_all, work)
        return work[:2]

    def wanted(self) -> bool:
        """Whether this step may go to the worker (asked on the training thread at each step
        that could): not while paused; a crowded machine (``CROWDED_SWITCHES``) pauses it."""
        if self.paused:
            self.paused -= 1
            return False
        if self._window is None:  # the switches read at a window's ends only (a system call)
            self._window = (_preempted(), 0)
        start, steps = self._window
        if steps < CROWDED_STEPS:
            self._window = (start, steps + 1)
            return True
        self._window = None
        if _preempted() - start >= CROWDED_SWITCHES * steps:
            self.paused = PAUSE_STEPS
            self.wait()  # the step in flight done before the training thread measures alone
            return False
        return True

    def then(self, job) -> PendingWork | None:
        """``job`` (it must not raise) done on the worker after the step under way's
        histograms, and before the next step's copy (``submit`` waits for it: what it reads
        may change from the next optimizer step on); None when no step is under way."""
        if self._last is None:
            return None
        later = PendingWork(job)
        self._last[2].append(later)  # done by the next step's copy at the latest
        _hand_over(self._on_worker, PendingWork.run, later)
        return later

    def keep(self, job) -> PendingWork | None:
        """``job`` (it must not raise) of a step not given to the worker (``OFFLOAD_MAX``), done
        by the first thread that asks for it — the run's writer thread, which writes what it
        gives, during the next forward and backward — or else by the next ``wait`` (the pre-hook
        of the next step, before it changes what ``job`` reads). Only where torch leaves a core
        free (as ``worth_offloading``) and the machine was not found crowded (``wanted``); None
        elsewhere: the caller does it now."""
        if self.paused or not (ENABLED and torch.get_num_threads() < _CORES):
            return None
        kept = PendingWork(job)
        self._kept.append(kept)
        return kept

    def wait(self) -> None:
        """The step under way's work done (by the worker, or here where it has not started),
        and the jobs kept (``keep``) that no other thread has done."""
        last, self._last = self._last, None
        if last is not None:
            _run_all(last)
        kept, self._kept = self._kept, []
        for job in kept:
            job.run()

    def _on_worker(self, run, work) -> None:
        start = time.thread_time()
        run(work)
        self.cpu_seconds += time.thread_time() - start


def _copied(at: BA.Addresses, starts, flat):
    """The gradients copied and their moments (``copy_and_moments_at``); where that fails, the
    copy alone (``copy_at``) and None: the moments are then taken from the copy."""
    try:
        return BA.copy_and_moments_at(at, starts, flat)
    except Exception:  # noqa: BLE001 - the copy must be taken; the moments are measured again
        KA.copy_at(at.addresses, at.sizes, at.like, starts, flat)
        return None


def _run_all(work: tuple) -> None:
    """The copy, the moments, the histograms and the work added (``then``) of one step, in
    that order."""
    copied, moments, later = work
    copied.run()
    ok, raw = moments.run()
    pending = raw.pending if ok else None  # None once a reader has taken the counts
    if pending is not None:
        pending.run()
    for job in later:
        job.run()
