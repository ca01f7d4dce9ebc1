"""Each backward's own gradient, from ``.grad`` at the end of consecutive backwards: what the
noise scale (``core/stats/noise_scale.py``) needs from an accumulating step, with no extra
backward.

The accumulation probe (``probe.py``) calls ``MicroBatchNorms.backward`` at the end of every
backward of a recorded step, with every parameter's ``.grad``. Backward ``i`` added its own
gradient ``d_i`` to ``.grad``: ``d_i = A_i − A_{i−1}``, ``A`` the gradient held at the end of
each backward (``A_0 = 0``: gradients are zeroed or set to None before a step's first backward,
as ``optimizer.zero_grad()`` does). A kept copy of ``A_{i−1}`` (one float buffer the size of
the gradients) gives ``|d_i|²`` per parameter, summed over the step's backwards, and ``|A_k|²``
at the last; both in float64. On the CPU one Numba pass per backward reads each gradient in
place (``kernels_micro``); elsewhere (or before the kernels are compiled) torch's foreach ops.

A loop with one backward per step needs none of this: after ``SINGLE_STEPS`` recorded steps of
one backward each the copy is no longer kept (a step of several backwards turns it on again
from its next step).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import compress, repeat
from operator import attrgetter, is_, is_not

import numpy as np
import torch

from gradexplorer.core.stats.backends import warmup as stats_warmup

_IS_SPARSE = attrgetter("is_sparse")
SINGLE_STEPS = 3  # recorded steps of one backward each before the copy is no longer kept


@dataclass(frozen=True)
class MicroBatchSums:
    """One step's sums: ``parts`` backwards; per parameter (``present``: had a gradient at the
    end) ``diff_sq`` = Σ_i |d_i|² and ``last_sq`` = |A_k|² (float64); ``why``: why the step has
    no figures (then the arrays are empty)."""

    parts: int
    present: tuple[bool, ...]
    diff_sq: np.ndarray
    last_sq: np.ndarray
    why: str | None = None


_KERNEL: tuple | None = None  # (addresses_of, diff_squares_at), or () without Numba


def _kernel():
    """The Numba kernel once compiled (or loaded), else None (torch's ops meanwhile)."""
    global _KERNEL
    if _KERNEL is None:
        if not stats_warmup.ready():
            return None
        try:
            from gradexplorer.core.stats.backends.numba.in_place import addresses_of
            from gradexplorer.core.stats.backends.numba.kernels_micro import diff_squares_at
            _KERNEL = (addresses_of, diff_squares_at)
        except Exception:  # noqa: BLE001 - no Numba: the torch path
            _KERNEL = ()
    return _KERNEL or None


class MicroBatchNorms:
    """Sums of each backward's own squared gradient norms over a step (see the module)."""

    def __init__(self, count: int) -> None:
        self.count = count  # parameters, in the probe's order
        self.keep = True  # keep the copy (False: a one-backward loop, see SINGLE_STEPS)
        self._singles = 0
        self.used: str | None = None  # "numba" or "torch": the path of the step's backwards
        self._flat = np.zeros(0, np.float32)  # the Numba path's copy, laid end to end (kept)
        self._reset()

    def _reset(self) -> None:
        self.parts = 0
        self._diff = np.zeros(self.count)
        self._last = np.zeros(self.count)
        self._present: tuple[bool, ...] = ()
        self._why: str | None = None
        self._at = self._held = None  # the Numba path: the step's gradients and their addresses
        self._kept: list[torch.Tensor | None] | None = None  # the torch path's copy

    def backward(self, grads: list[torch.Tensor | None]) -> np.ndarray | None:
        """At the end of a backward of a recorded step: add its ``|d_i|²``. Returns every
        parameter's ``|.grad|²`` (0 without one), None where not measured."""
        self.parts += 1
        if not self.keep or self._why is not None:
            return None
        try:
            present = tuple(map(is_not, grads, repeat(None)))
            if self.parts > 1 and present != self._present:
                self._why = "a parameter's gradient appeared or went between backwards"
                return None
            self._present = present
            every = len(present) == self.count and all(present)
            held = grads if every else list(compress(grads, present))
            if self.parts == 1 and any(map(_IS_SPARSE, held)):
                self._why = "sparse gradients"
                return None
            diff = self._numba(held) if self._kept is None else None
            self.used = "numba"
            if diff is None:
                diff, last, self.used = *self._torch(held), "torch"
            else:
                diff, last = diff
            if every:
                self._diff += diff
                self._last = last
            else:
                index = np.flatnonzero(present)
                self._diff[index] += diff
                self._last = np.zeros(self.count)
                self._last[index] = last
            return self._last
        except Exception as exc:  # noqa: BLE001 - a monitor never breaks the backward it watches
            self._why = f"the capture failed ({type(exc).__name__}: {exc})"
            return None

    def _numba(self, held: list[torch.Tensor]):
        """(Σ|d|², |A|²) by the kernel; None where it cannot read the gradients (then the step
        takes the torch path from its first backward on)."""
        first = self.parts == 1
        if first or not all(map(is_, held, self._held)):  # new tensors: their addresses
            kernel = _kernel()
            at = None if kernel is None else kernel[0](held)
            if at is None or (not first and (at.total != self._at.total or
                                             at.like.dtype != self._at.like.dtype)):
                if first:
                    return None
                raise ValueError("the gradients changed size, dtype or layout between backwards")
            if first and (self._flat.size != at.total or self._flat.dtype != at.like.dtype):
                self._flat = np.empty(at.total, at.like.dtype)
            self._at, self._held = at, list(held)
            self._starts = np.concatenate([[0], np.cumsum(at.sizes)[:-1]]).astype(np.int64)
        at = self._at
        diff, last = np.empty(len(held)), np.empty(len(held))
        _KERNEL[1](at.addresses, at.sizes, at.like, self._flat, self._starts, first, diff, last)
        return diff, last

    def _torch(self, held: list[torch.Tensor]):
        """(Σ|d|², |A|²) by torch's foreach ops (float64 norms), the copy kept as tensors."""
        with torch.no_grad():
            if self._kept is None:
                diffs = held
                self._kept = [g.detach().clone() for g in held]
            else:
                diffs = torch._foreach_sub(held, self._kept)
                torch._foreach_copy_(self._kept, held)
            both = torch._foreach_norm(list(diffs) + held, 2, dtype=torch.float64)
            values = torch.stack(both).cpu().numpy() ** 2
        return values[:len(held)], values[len(held):]

    def take(self) -> MicroBatchSums:
        """At a recorded step: its sums; starts the next step."""
        parts, why = self.parts, self._why
        if not self.keep and parts > 1:
            why, self.keep, self._singles = "the loop had one backward a step until now", True, 0
        elif parts == 1:
            self._singles += 1
            self.keep = self._singles < SINGLE_STEPS
        elif parts > 1:
            self._singles = 0
        out = MicroBatchSums(parts, self._present, self._diff.copy(), self._last.copy(), why) \
            if why is None and parts else MicroBatchSums(parts, (), np.zeros(0), np.zeros(0),
                                                         why or "no backward")
        self._reset()
        return out

    def skip(self) -> None:
        """At a step that is not recorded: starts the next step."""
        self._reset()


def compile_kernel() -> None:
    """The kernel compiled (or loaded from Numba's cache) for float32 and float64 gradients
    (``numba.warm_pass``)."""
    from gradexplorer.core.stats.backends.numba.in_place import addresses_of
    from gradexplorer.core.stats.backends.numba.kernels_micro import diff_squares_at

    for dtype in (torch.float32, torch.float64):
        at = addresses_of([torch.ones(3, dtype=dtype)])
        diff_squares_at(at.addresses, at.sizes, at.like, np.zeros(3, at.like.dtype),
                        np.zeros(1, np.int64), True, np.zeros(1), np.zeros(1))
