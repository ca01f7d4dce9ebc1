"""The statistics backends a GradientMonitor measures with: Numba kernels for CPU tensors
(``NumbaBackend``; with ``offload``, watch's work on the statistics worker thread) and fused
torch ops for any device (``TorchBackend``), chosen by ``make_backend``.

Each has ``begin(grads, params, want_histograms, bins, hist_range, optimizer)`` before the
optimizer steps, ``nonfinite(pending)`` (NaN/Inf from the counts begin took), ``finish(pending,
params, optimizer) -> RawStats`` after it, ``settle()`` and ``later(job)`` (work on the worker
thread; a no-op and None where there is none) and ``worker_seconds``.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch

from gradexplorer.core.stats.backends import warmup as stats_warmup
from gradexplorer.core.stats.backends.raw import INFS, NANS

BACKENDS = ("auto", "numba", "torch")


class NumbaBackend:
    """CPU gradients: fused Numba kernels; parameter copies kept for the update ratio. With
    ``offload`` (``watch``) and a core to spare, the gradients are copied and their statistics
    computed on a worker thread (``numba.worker``): the moments during the optimizer step
    (``finish`` waits for them), the histograms after it, read when first asked for. A step
    with neither histograms nor update ratio is measured in place (its moments cost about what
    the copy would: no copy, no hand-off)."""

    name = "numba"

    def __init__(self, offload: bool = False) -> None:
        from gradexplorer.core.stats.backends.numba import cpu as grad_backend_cpu
        from gradexplorer.core.stats.backends.numba import in_place as grad_backend_at
        from gradexplorer.core.stats.backends.numba import worker as stats_worker
        from gradexplorer.core.stats.backends.numba.update_state import UpdateStateTracker

        self._cpu, self._at, self._worker = grad_backend_cpu, grad_backend_at, stats_worker
        self._tracker = UpdateStateTracker()
        self._offloaded = stats_worker.OffloadedStats() if offload else None
        self._values: int | None = None  # gradient values of the step under way, read in place

    def begin(self, grads, params, want_histograms, bins, hist_range, optimizer=None):
        at = self._at.addresses_of(grads)  # in place, one call per pass, where it can
        self._values = None if at is None else at.total  # the step's size (finish's states)
        offloaded = self._offloaded
        if offloaded is not None and at is not None and (want_histograms or params is not None) \
                and self._worker.worth_offloading(at) and offloaded.wanted():
            copied, raw = offloaded.submit(at, want_histograms, bins, hist_range)
            if params is not None:  # the weights copied here while the worker copies the gradients
                self._tracker.before(params, optimizer)
            copied.result()  # both copies taken: the loop may change either now
            return raw  # the worker's PendingWork: finish waits for it
        if offloaded is not None:
            offloaded.wait()  # the last offloaded step's work done: it reads what changes now
        if at is None:
            raw = self._cpu.compute(grads, want_histograms, bins, hist_range)
        else:
            raw = self._at.compute_at(at, want_histograms, bins, hist_range)
        if params is not None:
            self._tracker.before(params, optimizer)
        return raw

    @property
    def worker_seconds(self) -> float:
        return 0.0 if self._offloaded is None else self._offloaded.cpu_seconds

    def settle(self) -> None:
        if self._offloaded is not None:
            self._offloaded.wait()

    def later(self, job):
        """``job`` on the worker after this step's statistics, done before the next step's
        begins (``numba.worker.OffloadedStats.then``); where no step is under way there, kept
        for whichever thread asks first (``keep``); None without a worker or a core free."""
        if self._offloaded is None:
            return None
        return self._offloaded.then(job) or self._offloaded.keep(job)

    def _settled(self, raw):
        return raw.result() if isinstance(raw, self._worker.PendingWork) else raw

    def nonfinite(self, raw):
        """Whether the gradients of ``raw`` (``begin``'s) hold NaN/Inf, read from their
        counts (no pass of its own), and what ``finish`` now takes in its place."""
        raw = self._settled(raw)
        return bool(raw.moments[:, NANS].any() or raw.moments[:, INFS].any()), raw

    def finish(self, raw, params, optimizer=None, states=None):
        """``states`` (with ``params``: a state tensor of each, e.g. SGD's momentum): their
        norms read in the update norms' pass where it can (``numba.update_state``), as
        ``raw.state_norms``; a step of more values than the worker takes (``OFFLOAD_MAX``:
        GPT-2 small's) leaves them to the caller, as before (``optimizer_state``, by the writer
        thread where a core is free: its training thread as light as it was). Decided by the
        step's size alone, so a run's figures are the same bits whatever the machine's load."""
        helper = None if self._offloaded is None else self._offloaded.then  # may take half
        state_norms = None
        if states and (self._values is None or self._values > self._worker.OFFLOAD_MAX):
            states = None  # too big for the worker: read apart, off this thread where a core is free
        if params is None:
            update = None
        elif states:
            update, state_norms = self._tracker.after_with_states(params, helper, states)
        elif helper is None:
            update = self._tracker.after(params, optimizer)
        else:  # the worker may take half of the update norms (``UpdateCopies.update_norms``)
            update = self._tracker.after(params, optimizer, helper)
        raw = self._settled(raw)
        if params is not None:
            raw.update, raw.state_norms = update, state_norms
        return raw


class TorchBackend:
    """Any device: fused torch ops queued on the device, one transfer per device in ``finish``."""

    name = "torch"
    worker_seconds = 0.0  # no worker thread: the device works beside the host
    until_numba = False  # make_backend: True where it stands in while Numba's kernels load

    def __init__(self, triton: bool = True, overlap: bool = False) -> None:
        from gradexplorer.core.stats.backends.torch.grouped import FusedTorch

        # triton=False: the eager ops even where Triton runs; overlap: CUDA side streams
        self._dev = FusedTorch(triton, overlap)

    def later(self, job):
        return None

    def settle(self) -> None:
        pass

    def begin(self, grads, params, want_histograms, bins, hist_range, optimizer=None):
        return self._dev.begin(grads, params, want_histograms, bins, hist_range)

    def nonfinite(self, pending):
        """Whether the gradients of ``pending`` hold NaN/Inf, from the NaN and Inf counts
        queued with their statistics (no pass of its own; one scalar read per device)."""
        return self._dev.nonfinite(pending), pending

    def finish(self, pending, params, optimizer=None, states=None):
        return self._dev.finish(pending, params)  # no states' norms: the caller reads them


def numba_available() -> bool:
    """True when the Numba kernels are loaded; never waits: the first call starts loading
    them off this thread (``backends.warmup``), False until then (and for good where Numba cannot
    load)."""
    return stats_warmup.ready()


def until_numba(backend) -> bool:
    """Whether ``backend`` stands in for the Numba one until its kernels are loaded and they
    now are: the caller makes its backend again (between steps)."""
    return getattr(backend, "until_numba", False) and numba_available()


def cpu_second_moments(vs: list[torch.Tensor], ws: list[torch.Tensor], bc: list[float],
                       lr: list[float], eps: list[float]) -> np.ndarray | None:
    """``(P, 2)``: RMS √v̂ and the effective lr of each optimizer state (``v``, ``w``: the
    second moments and their denominators), by the Numba kernel reading the CPU states in place
    (the same float64 terms as ``optimizer_state``'s torch ops, summed in another order); None
    where it cannot (another device or dtype, no Numba, its kernels not loaded yet:
    ``backends.warmup``)."""
    from gradexplorer.core.stats.backends import warmup as stats_warmup

    if not stats_warmup.ready():
        return None
    try:
        from gradexplorer.core.stats.backends.numba import kernels_in_place as KA
        from gradexplorer.core.stats.backends.numba.in_place import addresses_of
    except Exception:  # noqa: BLE001 - no Numba, or no kernel cache: the torch ops
        return None
    v_at, w_at = addresses_of(vs), addresses_of(ws)
    if v_at is None or w_at is None or v_at.like.dtype != w_at.like.dtype or \
            v_at.sizes.tobytes() != w_at.sizes.tobytes():
        return None
    out = np.empty((len(vs), 2))
    KA.second_moments_at(v_at.addresses, w_at.addresses, v_at.sizes, v_at.like, np.array(bc),
                         np.array(lr), np.array(eps), out)
    return out


def make_backend(name: str, tensors: Iterable[torch.Tensor], overlap: bool = False,
                 offload: bool = False):
    """The backend ``name`` asks for; ``auto`` takes Numba for CPU tensors once its kernels
    are loaded (torch until then: ``until_numba``);
    ``overlap``: the torch backend's CUDA statistics on a side stream; ``offload``: Numba's
    histograms on a worker thread where a core is spare."""
    if name not in BACKENDS:
        raise ValueError(f"unknown statistics backend {name!r}; choose one of {BACKENDS}")
    on_cpu = all(t.device.type == "cpu" for t in tensors)
    if name == "numba" or (name == "auto" and on_cpu and numba_available()):
        return NumbaBackend(offload)
    backend = TorchBackend(overlap=overlap)
    backend.until_numba = name == "auto" and on_cpu  # the exact fallback while Numba loads
    return backend
