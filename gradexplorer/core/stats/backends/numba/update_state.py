"""The update ratio's norms and the optimizer state's norm of each parameter in one pass.

After ``optimizer.step()`` the update ratio reads each weight and its copy from before the step
(‖θ − θ_before‖, ‖θ_before‖: ``kernels.update_norm_of``), and a run directory's optimizer
figures read each parameter's momentum (SGD's ``momentum_buffer``, Adam's ``exp_avg``: ‖·‖,
``optimizer_state``) — three arrays of the parameter's size. Read in one loop, the three
streams share the memory's latency: on ResNet-18 (11.7M float32) 7.7–7.9 ms instead of 9.6
(6.1 + 3.5) for the two passes apart, on one core. Each sum is a float64 sum of the float64
squares (the additions reordered, as every norm kernel here), so each norm equals an
independent float64 computation to rounding; where a sum is not a clean finite float64 (a
NaN or Inf, an overflow, squares small enough to underflow) that tensor's norms are taken by
the careful kernels (``update_norm_of``, ``norm_of_array``: scaled passes, NaN and Inf kept).
Used where a run directory records the optimizer's figures (``GradientMonitor.state_norms``) on
steps the worker's size takes (``registry.NumbaBackend.finish``). As ``kernels_in_place``,
Numba's on-disk cache of these kernels holds the ``kernels`` they call compiled in and is
invalidated only by a change to this file: touch it when those change.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from numba import njit

from gradexplorer.core.stats.backends.numba.in_place import (
    SHARED_MIN,
    Addresses,
    KeptAddresses,
    UpdateCopies,
    balanced,
    in_shares,
    shares,
)
from gradexplorer.core.stats.backends.numba.kernels import (
    TINY,
    norm_of_array,
    update_norm_of,
    update_state_sums,
)
from gradexplorer.core.stats.backends.numba.kernels_in_place import _at
from gradexplorer.core.stats.backends.numba.update_ratio import UpdateTracker


@njit(nogil=True, cache=True)
def _clean(s):
    """A sum of squares whose square root is the norm as it is: finite, and not so small that
    squares may have underflowed (0 is not clean: all of them may have)."""
    return s - s == 0.0 and not s < TINY


@njit(nogil=True, cache=True)
def update_state_norms_at(addresses, sizes, like, before, starts, state_addresses, out):
    """``out[i] = (‖tensor i − before_i‖, ‖before_i‖, ‖state i‖)``, ``before_i`` at
    ``before[starts[i]:]``, state ``i`` a tensor of tensor ``i``'s size and dtype at
    ``state_addresses[i]``: one loop over the three where each sum is clean, else
    ``update_norm_of`` and ``norm_of_array`` of that tensor."""
    for i in range(addresses.size):
        new = _at(addresses, sizes, i, like)
        old = before[starts[i]:starts[i] + sizes[i]]
        state = _at(state_addresses, sizes, i, like)
        d2, o2, s2 = update_state_sums(new, old, state)
        if _clean(d2) and _clean(o2) and _clean(s2):
            out[i, 0], out[i, 1], out[i, 2] = math.sqrt(d2), math.sqrt(o2), math.sqrt(s2)
            continue
        update_norm_of(new, old, out[i, :2])
        out[i, 2] = norm_of_array(state)


class UpdateStateCopies(UpdateCopies):
    """``UpdateCopies`` whose norms after the step may read a state tensor of each weight in
    the same pass (``update_state_norms``)."""

    def __init__(self) -> None:
        super().__init__()
        self._states = KeptAddresses()
        self._split: tuple[bytes, list[np.ndarray]] | None = None  # (sizes, their halves)

    def update_state_norms(self, params: list[torch.Tensor], helper, states: list[torch.Tensor]
                           ) -> tuple[np.ndarray, np.ndarray | None]:
        """``(update, state_norms)``: ``update_norms``'s ``(P, 2)`` and, where ``states`` (one
        tensor a parameter, each of its parameter's size and dtype) can be read in place beside
        the weights, ``(P,)`` their norms from the same pass (half of them on the worker, as
        the update norms); else None (the caller reads them)."""
        fused = self._fused(params, states)
        if fused is None:
            return self.update_norms(params, helper), None
        at, state_at, buffer = fused

        def norms(part: Addresses, rows) -> np.ndarray:
            out = np.zeros((part.sizes.size, 3))
            update_state_norms_at(part.addresses, part.sizes, part.like, buffer.flat,
                                  buffer.starts[rows], state_at.addresses[rows], out)
            return out
        out = np.zeros((at.sizes.size, 3))
        halves = self._halves(at.sizes) if helper is not None and at.total >= SHARED_MIN \
            and at.sizes.size > 1 and len(shares(at)) == 1 else []
        other = helper(lambda: norms(at.part(halves[1]), halves[1])) if len(halves) == 2 else None
        if other is None:
            in_shares(at, norms, out)
        else:
            out[halves[0]] = norms(at.part(halves[0]), halves[0])
            out[halves[1]] = other.result()  # done on the worker, or here if it has not begun
        return out[:, :2], out[:, 2].copy()

    def _halves(self, sizes: np.ndarray) -> list[np.ndarray]:
        """``balanced(sizes, 2)``, kept while the sizes are the same (the weights' every step)."""
        key = sizes.tobytes()
        if self._split is None or self._split[0] != key:
            self._split = (key, balanced(sizes, 2))
        return self._split[1]

    def _fused(self, params, states):
        """``(weights' Addresses, states' Addresses, the copies' buffer)`` where one pass can
        read them all, else None."""
        if not states or len(states) != len(params) or self._packed is not None:
            return None
        at = self._where.of(params)
        if at is None or not self._buffer.holds(at):
            return None
        state_at = self._states.of(states)
        if state_at is None or state_at.like.dtype != at.like.dtype \
                or not np.array_equal(state_at.sizes, at.sizes):
            return None
        return at, state_at, self._buffer


class UpdateStateTracker(UpdateTracker):
    """``UpdateTracker`` whose ``after_with_states`` reads a state tensor of each weight in the
    update norms' pass."""

    def __init__(self) -> None:
        self.copies = UpdateStateCopies()

    def after_with_states(self, params: list[torch.Tensor], helper, states: list[torch.Tensor]
                          ) -> tuple[np.ndarray, np.ndarray | None]:
        """``(update (P, 2), states' norms (P,) or None)``: ``UpdateStateCopies.update_state_norms``."""
        return self.copies.update_state_norms(params, helper, states)
