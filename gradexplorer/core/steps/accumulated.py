"""The gradient *as accumulated*: per-parameter norms of ``.grad`` at the end of every backward.

An optimizer step sees two gradients. The one backward left in ``.grad`` (summed over the
micro-batches, still multiplied by a GradScaler's scale) and the one the optimizer uses (after
``GradScaler.unscale_`` and ``clip_grad_norm_``, which both rewrite ``.grad`` in place between
the last backward and ``optimizer.step()``). The step pre-hook only sees the second; this probe
reads the first where it exists: a post-accumulate-grad hook on each parameter queues one
callback of the autograd engine per backward, which runs once the whole backward is done (and
re-queues itself once, so it runs after the callbacks others queued meanwhile, such as DDP's
gradient reduction). The callback queues one ``torch._foreach_norm`` in float64 per (device,
dtype) group and a ``stack``: a fixed number of ops whatever the parameter count, no host
transfer (the norms stay on the device until the step's own transfer).

With the model given, a forward hook also puts a gradient hook on its outputs: that one fires
first in every backward through the model, inside the outermost backward, so the callback is
queued there. Without it a reentrant backward nested in another (``checkpoint(...,
use_reentrant=True)``, which runs its own backward for each segment) would end first and count
as a backward of its own.

The probe itself (``AccumulationProbe``, and when it may take the applied point's norms
instead of measuring): ``probe.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from gradexplorer.core.stats.backends import warmup as stats_warmup
from gradexplorer.core.stats.measured import measured_tensors


@dataclass(slots=True)
class AccumulatedNorms:
    """Per-parameter ‖.grad‖ (float64) at the end of the last backward before a step.

    ``present``: which of the probe's parameters had a gradient; ``norms``: one value per
    present parameter, on the device until ``host()``; ``at_step``: measured at the step
    itself because no backward was seen (gradients set by hand, or written by a framework
    outside autograd): then it is the gradient as the step found it.
    """

    present: Sequence[bool]
    norms: torch.Tensor | np.ndarray | None
    at_step: bool = False
    reuse: bool = False  # the tensors backward left reached the step unchanged: the applied norms
    check: Callable[[np.ndarray | None], bool] | None = None  # tell the probe the applied norms

    def host(self) -> np.ndarray:
        """The norms as float64 numbers (one transfer)."""
        if self.norms is None:
            return np.zeros(0, np.float64)
        if isinstance(self.norms, np.ndarray):
            return self.norms
        return self.norms.detach().cpu().numpy().astype(np.float64)


_CPU_KERNELS: tuple | None = None  # (addresses_of, norms_at, flat_array, norm_of_array) or ()


def _cpu_kernels() -> tuple:
    """The Numba norm kernels, imported once; () when Numba is not available, or not yet
    loaded (``backends.warmup``: torch's float64 norms meanwhile)."""
    global _CPU_KERNELS
    if _CPU_KERNELS is None:
        if not stats_warmup.ready():
            return ()
        try:
            from gradexplorer.core.stats.backends.numba.cpu import flat_array
            from gradexplorer.core.stats.backends.numba.in_place import addresses_of, norms_at
            from gradexplorer.core.stats.backends.numba.kernels import norm_of_array
            _CPU_KERNELS = (addresses_of, norms_at, flat_array, norm_of_array)
        except Exception:  # noqa: BLE001 - no Numba, or no kernel cache: the torch path
            _CPU_KERNELS = ()
    return _CPU_KERNELS


def _cpu_norms(grads: list[torch.Tensor]) -> np.ndarray | None:
    """On the CPU: the Numba norm kernel over each gradient (float64 sums of squares,
    vectorised; torch's float64 reductions are several times slower there); None when Numba
    is not available."""
    kernels = _cpu_kernels()
    if not kernels:
        return None
    addresses_of, norms_at, flat_array, norm_of_array = kernels
    at = addresses_of(grads)  # in place, one kernel call, where it can
    if at is not None:
        return norms_at(at)
    return np.array([norm_of_array(flat_array(g)) for g in grads], np.float64)


def grad_norms(grads: list[torch.Tensor], numba: bool = True) -> torch.Tensor | np.ndarray | None:
    """‖g‖ of each gradient in float64, in the order given: on a device (or with
    ``numba=False``) one foreach norm per (device, dtype) group (a tensor on that device), on
    the CPU the Numba kernel (a numpy array)."""
    if not grads:
        return None
    dense = measured_tensors(grads)  # dense, a complex one as its real and imaginary parts
    if numba and all(g.is_cpu for g in dense):
        on_cpu = _cpu_norms(dense)
        if on_cpu is not None:
            return on_cpu
    groups: dict[tuple, list[int]] = {}
    for i, g in enumerate(dense):
        groups.setdefault((g.device, g.dtype), []).append(i)
    device = dense[0].device
    out = torch.empty(len(dense), dtype=torch.float64, device=device)
    with torch.no_grad():
        for idx in groups.values():
            parts = torch._foreach_norm([dense[i] for i in idx], 2, dtype=torch.float64)
            values = torch.stack(parts).to(device)
            if len(groups) == 1:
                return values
            out[torch.tensor(idx, device=device)] = values
    return out
