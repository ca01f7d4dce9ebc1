"""Each backward's own gradient, as it reaches the parameters: what the noise scale
(``core/stats/noise_scale.py``) needs from an accumulating step, with no extra backward.

A hook on each parameter tensor (``Tensor.register_hook``) receives the gradient backward is about
to add to ``.grad`` — backward ``i``'s own gradient ``d_i``, summed over every use of the
parameter in that backward, before accumulation (so it does not matter whether ``.grad`` was
zeroed). Where the statistics' Numba kernels are ready and ``d_i`` is a dense, contiguous CPU
tensor of float32 or float64 of ``READ_MIN`` values or more, the hook reads its float64
``|d_i|²`` there and then (``_Reader``): ``d_i`` was just written, so it is read from the cache,
and autograd frees or reuses its memory as without the capture (holding every backward's large
``d_i`` to the step made each backward write fresh memory and the step's pass read it all back:
on a 64×256 MLP at 8 micro-batches, a step recorded one in 8 cost +52% of the bare step held,
+26% read in its hooks; every step +26–27% and +22–24%). Such a read costs a Python call and a
kernel call (~2 µs) a parameter and backward, more than it saves on a small gradient, which stays
in the cache until the step's pass anyway (with ``READ_MIN`` 4,096 the digits and transformer
examples took 1–2% more of their step), and a gradient of ``SHARED_MIN`` values or more with
several torch threads is held for a pass shared among them. What the hooks read in a backward
counts once that backward's end says the step is recorded (the probe's callback), as the held
references do. Every other gradient is held: its hook is the ``append`` of a list kept for that
parameter (a C-level call: no Python frame, nothing made per parameter and backward but the
reference), read once a step: at the step (``take``) one pass over every backward's held
``d_i`` adds their float64 ``|d_i|²`` to the step's sums, then they are dropped (the same kernel
a tensor as the hook's: the same figures). The held gradients are at most
``HOLD_BYTES`` (64 MiB); where the backwards of a step would hold more (a large model) they are
read at the end of each backward instead, once ``HOLD_BYTES`` worth of backwards are held (the
accumulation probe's callback, ``probe.py``, calls ``backward``): a model of over 64 MiB of
parameters holds one backward's gradient, from its accumulation to that backward's end. On
the CPU the pass is the statistics' Numba norm kernel over the tensors in place (one call);
elsewhere, or before the kernels are compiled, torch's foreach norm (float64). ``|A_k|²``, the
accumulated gradient's, is the probe's accumulated norm at the step.

A loop with one backward per step needs none of this: after ``SINGLE_STEPS`` recorded steps of
one backward each the hooks are removed (a step of several backwards puts them back: figures
again from its next step).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from itertools import chain, repeat
from operator import attrgetter, is_not

import numpy as np
import torch
from torch import nn

from gradexplorer.core.stats.backends import warmup as stats_warmup

SINGLE_STEPS = 3  # recorded steps of one backward each before the hooks are removed
HOLD_BYTES = 64 << 20  # the backwards' own gradients held for the step's one pass, at most
READ_MIN = 1 << 16  # values: a gradient this large is read in its hook (_Reader), a smaller one held
SHARED_MIN = 1 << 19  # values a pass shares out among torch's threads, at least (several threads)


@dataclass(frozen=True)
class MicroBatchSums:
    """One step's sums: ``parts`` backwards; ``diff_sq[j]`` = Σ_i |d_i|² of parameter ``j``
    (float64, 0 where no backward reached it); ``why``: why the step has no figures."""

    parts: int
    diff_sq: np.ndarray
    why: str | None = None


_KERNEL: tuple | None = None  # (norms_at kernel, shared pass), or () without Numba
_LIKE = {torch.float32: np.zeros(0, np.float32), torch.float64: np.zeros(0, np.float64)}
_DTYPE, _IS_CPU, _IS_SPARSE = attrgetter("dtype"), attrgetter("is_cpu"), attrgetter("is_sparse")
_PTR, _NUMEL, _CONTIGUOUS = torch.Tensor.data_ptr, torch.Tensor.numel, torch.Tensor.is_contiguous


def _kernel():
    """The Numba norm kernel once compiled (or loaded), else None (torch's ops meanwhile)."""
    global _KERNEL
    if _KERNEL is None:
        if not stats_warmup.ready():
            return None
        try:
            from gradexplorer.core.stats.backends.numba import in_place
            from gradexplorer.core.stats.backends.numba.kernels_in_place import norms_at
            _KERNEL = (norms_at, in_place)
        except Exception:  # noqa: BLE001 - no Numba: the torch path
            _KERNEL = ()
    return _KERNEL or None


def _in_place(grads: list[torch.Tensor]) -> tuple | None:
    """``(addresses, sizes, like)`` where the kernel can read every gradient where it lies
    (dense, contiguous CPU tensors of one kernel dtype, each with storage); else None. C-level
    loops over the tensors: this runs at every recorded step."""
    dtype = grads[0].dtype
    like = _LIKE.get(dtype)
    if like is None or any(map(is_not, map(_DTYPE, grads), repeat(dtype))) or \
            not all(map(_IS_CPU, grads)) or any(map(_IS_SPARSE, grads)) or \
            not all(map(_CONTIGUOUS, grads)):
        return None
    count = len(grads)
    addresses = np.fromiter(map(_PTR, grads), np.int64, count)
    if not addresses.all():  # no storage of its own (empty, a DTensor): the torch path
        return None
    return addresses, np.fromiter(map(_NUMEL, grads), np.int64, count), like


def squared_norms(grads: list[torch.Tensor]) -> tuple[np.ndarray, str]:
    """float64 ``|g|²`` of each gradient, and the path taken ("numba" or "torch")."""
    kernel = _kernel()
    at = None if kernel is None else _in_place(grads)
    if at is not None:
        addresses, sizes, like = at
        if torch.get_num_threads() > 1 and sizes.size > 1 and sizes.sum() >= SHARED_MIN:
            shared = kernel[1]  # enough work for torch's threads: shared out among them
            norms = shared.norms_at(shared.Addresses(addresses, sizes, like, grads))
        else:
            norms = np.empty(sizes.size)
            kernel[0](addresses, sizes, like, norms)
        return np.square(norms, out=norms), "numba"
    if any(g.is_sparse for g in grads):
        raise ValueError("sparse gradients are not measured")
    with torch.no_grad():
        norms = torch._foreach_norm([g.detach() for g in grads], 2, dtype=torch.float64)
        return torch.stack([n.to("cpu") for n in norms]).numpy() ** 2, "torch"


class _Reader:
    """A large parameter's hook: ``|d_i|²`` added to its capture's ``_now[row]`` (counted at the
    backward's end, or dropped), or ``d_i`` held (``hold``) where it cannot be read in place:
    ``_in_place``'s conditions for one tensor, checked on its attributes (that helper's arrays
    built for a list cost more than the read on this path, a call per parameter and backward)."""

    __slots__ = ("capture", "row", "hold", "at", "size", "norm")

    def __init__(self, capture: MicroBatchNorms, row: int, hold) -> None:
        self.capture, self.row, self.hold = capture, row, hold
        self.at, self.size, self.norm = np.zeros(1, np.int64), np.zeros(1, np.int64), np.empty(1)

    def __call__(self, grad: torch.Tensor) -> None:
        kernel = _KERNEL or _kernel()
        like = _LIKE.get(grad.dtype)
        if kernel is None or like is None or not grad.is_cpu or grad.is_sparse or \
                not grad.is_contiguous() or (grad.numel() >= SHARED_MIN and
                                             torch.get_num_threads() > 1):
            self.hold(grad)
            return
        capture = self.capture
        try:
            self.at[0], self.size[0] = grad.data_ptr(), grad.numel()
            if not self.at[0]:  # no storage of its own: the held pass (torch's ops)
                self.hold(grad)
                return
            kernel[0](self.at, self.size, like, self.norm)
            capture._now[self.row] += self.norm[0] * self.norm[0]
            capture._hot, capture.used = True, "numba"
        except Exception as exc:  # noqa: BLE001 - a monitor never breaks the backward it watches
            capture._why = f"the capture failed ({type(exc).__name__}: {exc})"


class MicroBatchNorms:
    """Sums of each backward's own squared gradient norms over a step (see the module)."""

    def __init__(self, params: list[nn.Parameter]) -> None:
        self.count = len(params)
        self._params = params
        self._held: list[list[torch.Tensor]] = [[] for _ in params]  # per parameter: its d_i
        self._rows = np.arange(self.count)
        size = sum(p.numel() * p.element_size() for p in params if p.requires_grad)
        self.hold = max(1, HOLD_BYTES // max(size, 1))  # backwards held before a pass
        self._handles: list = []
        self._singles = 0
        self.paused = self._off = False  # noise_every: hooks off until the next step it records
        self.used: str | None = None  # "numba" or "torch": the path of the last pass
        self._now, self._hot = np.zeros(self.count), False  # read in the hooks, not yet counted
        self._hooks = [_Reader(self, row, held.append) if p.numel() >= READ_MIN else held.append
                       for row, (held, p) in enumerate(zip(self._held, params, strict=True))]
        self._reset()
        self._hook()

    def _hook(self) -> None:
        self._handles = [p.register_hook(hook) for hook, p in zip(self._hooks, self._params,
                                                                  strict=True)
                         if p.requires_grad]

    @property
    def keep(self) -> bool:
        """Whether the hooks are on (False: a loop of one backward a step)."""
        return bool(self._handles)

    def pause(self, paused: bool) -> None:
        """``watch(noise_every=N)``: the hooks off for the steps the capture does not record
        (none installed: such a step costs nothing here), back on before the next it does
        (unless a loop of one backward a step has them off: ``take`` puts them back)."""
        if paused and not self.paused:
            self.paused, self._off = True, not self.keep
            self.remove()
        elif not paused and self.paused:
            self.paused = False
            if not self._off:
                self._hook()

    def _reset(self) -> None:
        self.parts = self._pending = 0
        self._diff = np.zeros(self.count)
        self._why: str | None = None

    def _drop(self) -> None:
        deque(map(list.clear, self._held), 0)  # a C-level loop (this runs every step)
        self._pending = 0
        if self._hot:  # the sums the hooks read, not yet counted
            self._now.fill(0.0)
            self._hot = False

    def backward(self, recorded: bool) -> None:
        """At the end of every backward: count it (a recorded step's), and read the gradients
        held once ``hold`` backwards are (a step not recorded: drop them, and a read of its that
        failed in a hook with them, where none of a recorded step is counted yet)."""
        if not recorded:
            self._drop()
            if not self.parts:
                self._why = None
            return
        self.parts += 1
        self._pending += 1
        if self._pending >= self.hold:
            self._read()

    def _read(self) -> None:
        """Add the held gradients' ``|d_i|²`` to the step's sums (one pass), drop them."""
        held = self._held
        counts = list(map(len, held))
        grads = list(chain.from_iterable(held))
        if self._hot and self._why is None:  # read in the hooks (_Reader)
            self._diff += self._now
        self._drop()
        if not grads or self._why is not None:
            return
        try:
            squares, self.used = squared_norms(grads)
            if counts.count(counts[0]) == self.count:  # as many of each parameter (the usual)
                self._diff += squares.reshape(self.count, counts[0]).sum(1)
            else:
                self._diff += np.bincount(np.repeat(self._rows, counts), squares, self.count)
        except Exception as exc:  # noqa: BLE001 - a monitor never breaks the loop it watches
            self._why = f"the capture failed ({type(exc).__name__}: {exc})"

    def take(self) -> MicroBatchSums:
        """At a recorded step: its sums; starts the next step."""
        if self._pending or self._hot or any(self._held):  # (a backward the probe missed)
            self._read()
        parts, why = self.parts, self._why
        if not self.keep and parts > 1:
            why, self._singles = "the loop had one backward a step until now", 0
            self._hook()
        elif parts == 1:
            self._singles += 1
            if self._singles >= SINGLE_STEPS and self.keep:
                self.remove()
        elif parts > 1:
            self._singles = 0
        out = MicroBatchSums(parts, self._diff, why or (None if parts else "no backward"))
        self._reset()
        return out

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        for p in self._params if self._handles else ():  # an emptied dict still costs a call
            if p._backward_hooks is not None and not p._backward_hooks:  # into Python a
                p._backward_hooks = None  # backward (its wrapper, ~2 µs): none left, none called
        self._handles = []
        self._drop()
