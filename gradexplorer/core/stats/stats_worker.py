"""A step's gradient statistics computed on a worker thread while the optimizer steps.

Before the optimizer step the training thread copies the step's gradients into one kept
buffer (a single Numba pass, ``kernels_at.copy_at``) and hands the copy to one worker thread;
the moments and histograms (``backend_at.compute_at``: the same kernels on the same values, so
the same figures bit for bit) run there, their Numba kernels without the GIL, on a core the
training thread does not use (torch at one thread). After the step, ``result()`` waits for
them, or computes them itself from the copy where the worker has not started (no core free).
At most one step is in flight per copy: ``submit`` first waits for the previous one (the
training thread waits, nothing is dropped). The copy makes the figures those of the gradient
at the optimizer's step pre-hook, whatever the optimizer does to ``.grad`` during the step.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import torch

from gradexplorer.core.stats import backend_at as BA
from gradexplorer.core.stats import kernels_at as KA
from gradexplorer.core.stats.histogram import HistRange
from gradexplorer.core.stats.raw import RawStats

OFFLOAD_MIN = 1 << 16  # fewer values than this: computed on the training thread (no hand-off)
# Opt-in (GRADEXPLORER_STATS_WORKER=1): measured on the 2-core machine (bench/recorder.py, mlp256,
# load 2.5-3.8) the worker cut the training thread's CPU but not its wall-clock step, which
# waits for the worker (3.18 ms fixed cost against 2.16 ms without it): off by default.
ENABLED = os.environ.get("GRADEXPLORER_STATS_WORKER") == "1"
_POOL: ThreadPoolExecutor | None = None
_LOCK = threading.Lock()


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


def worth_offloading(at: BA.Addresses) -> bool:
    """Whether the worker takes this step's statistics: asked for (``ENABLED``), torch leaves
    a core free (its
    threads fewer than the cores this process may use), the work is one kernel call's (not
    shared out among torch's threads) and big enough to outweigh the hand-off."""
    return ENABLED and torch.get_num_threads() < len(os.sched_getaffinity(0)) \
        and int(at.sizes.sum()) >= OFFLOAD_MIN and len(BA.shares(at)) == 1


def worker_cpu_seconds() -> float:
    """CPU seconds the worker thread has used (0 before it starts): watch's work off the
    training thread, for the benchmark."""
    pool = _POOL
    threads = [] if pool is None else list(pool._threads)
    return sum(time.clock_gettime(time.pthread_getcpuclockid(t.ident)) for t in threads
               if t.ident is not None and t.is_alive())


class OffloadedStats:
    """The gradients' copy (one kept flat buffer) and its statistics under way on the worker."""

    def __init__(self) -> None:
        self._flat = np.zeros(0, np.float32)
        self._sizes = np.zeros(0, np.int64)
        self._starts = np.zeros(0, np.int64)
        self._future: Future | None = None
        self._job: tuple = ()

    def submit(self, at: BA.Addresses, want_histograms: bool, bins: int, hist_range: HistRange) -> None:
        """Copy the tensors ``at`` now and start their statistics on the worker."""
        self.wait()  # the previous step's, if its result was never taken: the buffer is free
        total = int(at.sizes.sum())
        if self._flat.size != total or self._flat.dtype != at.like.dtype:
            self._flat = np.empty(total, at.like.dtype)
        if at.sizes.tobytes() != self._sizes.tobytes():
            self._sizes, self._starts = at.sizes, np.concatenate([[0], np.cumsum(at.sizes)[:-1]])
        KA.copy_at(at.addresses, at.sizes, at.like, self._starts, self._flat)
        copy = BA.Addresses(self._flat.ctypes.data + self._starts * self._flat.itemsize, at.sizes,
                            at.like, [self._flat])  # held while the worker reads it
        self._job = (copy, want_histograms, bins, hist_range)
        self._future = _pool().submit(lambda: BA.compute_at(*self._job))

    def result(self) -> RawStats:
        """The statistics submitted last: the worker's (waiting for them; their error, if they
        failed), or, where the worker has not started them yet (no core was free), computed
        here from the same copy rather than waited for."""
        future, self._future = self._future, None
        if future is None:
            raise RuntimeError("no statistics were submitted for this step")
        if future.cancel():
            return BA.compute_at(*self._job)
        return future.result()

    def wait(self) -> None:
        """Wait for the statistics under way, if any, and drop them."""
        future, self._future = self._future, None
        if future is not None and not future.cancel():
            future.exception()  # waits; an error of a step whose result nobody took is moot
