"""The noise scale's work of a recorded step done off the training thread, in step order
(``noise_watch.py``): the pass over the gradients its backwards held and the figures from it.

At the step the training thread only hands the step's references and numbers over (a few
C-level calls); a worker thread of its own (``gradexplorer-noise``) runs the jobs one after
another, in the order given: the smoothing (EMAs over steps) needs them in order. Whoever needs a
result (``rec.noise.latest``, the run's writer thread writing a step's rows, ``close``) runs the
jobs still waiting itself, under the same lock, so a result is never read before its step's job
has run and a job never runs twice. At most ``IN_FLIGHT`` steps wait: a worker that has not
caught up by the next step has the waiting job run on the training thread then (the held
gradients are never more than two steps'). Where no core is free for it (torch's threads as many
as the cores this process may use, torch's default) or ``GRADEXPLORER_STATS_WORKER=0``, every job
runs on the training thread at once, as before.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable

import torch

ENABLED = os.environ.get("GRADEXPLORER_STATS_WORKER", "1") != "0"
IN_FLIGHT = 1  # steps whose job may wait for the worker; one more: the training thread runs it
_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
_QUEUE: queue.SimpleQueue | None = None
_START = threading.Lock()


def _forget() -> None:
    """In a forked child: the parent's worker thread does not exist there; start afresh."""
    global _QUEUE, _START
    _QUEUE, _START = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)


def _serve(jobs: queue.SimpleQueue) -> None:
    while True:
        jobs.get().run()


def _worker() -> queue.SimpleQueue | None:
    """The worker's queue (started on first use); None where no thread can be started."""
    global _QUEUE, ENABLED
    with _START:
        if _QUEUE is None:
            jobs: queue.SimpleQueue = queue.SimpleQueue()
            try:
                threading.Thread(target=_serve, args=(jobs,), name="gradexplorer-noise",
                                 daemon=True).start()
            except RuntimeError:  # "can't start new thread": the training thread does the work
                ENABLED = False
                return None
            _QUEUE = jobs
        return _QUEUE


def offloaded() -> bool:
    """Whether jobs go to the worker: enabled and a core left free by torch's threads."""
    return ENABLED and torch.get_num_threads() < _CORES


class InOrder:
    """One watch's jobs, run in the order given (see the module)."""

    def __init__(self) -> None:
        self._jobs: deque[Callable[[], None]] = deque()
        self._lock = threading.Lock()
        self.seconds = 0.0  # CPU seconds its jobs took, on whichever thread (the benchmark's)

    def submit(self, job: Callable[[], None], offload: bool = True) -> None:
        """``job()`` (it must not raise) on the worker, or here (``offload`` False, or see the
        module)."""
        jobs = _worker() if offload and offloaded() else None
        if len(self._jobs) >= IN_FLIGHT or jobs is None:
            self.run()  # the worker has not caught up (or there is none): the waiting job here
        self._jobs.append(job)
        if jobs is None:
            self.run()
        else:
            jobs.put(self)

    def run(self) -> None:
        """Every job waiting, run here in order (the worker's, or any thread needing a result)."""
        with self._lock:
            while self._jobs:
                start = time.thread_time()
                self._jobs.popleft()()
                self.seconds += time.thread_time() - start
