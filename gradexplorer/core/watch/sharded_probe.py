"""The gradient *as accumulated* of sharded (DTensor) gradients: FSDP2, tensor parallelism.

The accumulation probe (``core/steps/probe.py``) finds the end of every backward: under FSDP2,
whose sharded gradients are written outside autograd, by the hook on the model's output (its
callback is queued again behind FSDP's own end-of-backward callback, so the gradients it reads
are the reduce-scattered ones). Here each rank measures the part of each gradient it counts
(``placements.counted_local``: a partial gradient is reduced there, a collective every rank's
backward reaches) and keeps it on the device; the applied point's all-gather
(``sharded.ShardedMeasure``) carries the parts to every rank and makes them the whole
parameters' norms (√Σ part²), so the ledger's accumulated norm is the total norm
``clip_grad_norm_`` computes before it clips. It never takes the applied norms instead: they are
the whole tensors', these a rank's part.
"""

from __future__ import annotations

import math

import torch

from gradexplorer.core.steps.accumulated import AccumulatedNorms
from gradexplorer.core.steps.probe import AccumulationProbe
from gradexplorer.core.watch.placements import UnreadablePlacement, counted_local
from gradexplorer.core.watch.sharded import _empty


def _part_norm(g: torch.Tensor) -> torch.Tensor:
    """‖the part of ``g`` this rank counts‖ in float64, on its device (NaN: not combinable)."""
    from gradexplorer.core.stats.measured import measured_tensor

    try:
        local = counted_local(g)
    except UnreadablePlacement:
        return torch.tensor(math.nan, dtype=torch.float64, device=_empty(g).device)
    if not local.numel():
        return torch.zeros((), dtype=torch.float64, device=local.device)
    return torch.linalg.vector_norm(measured_tensor(local).double())


class ShardedProbe(AccumulationProbe):
    """An AccumulationProbe measuring each rank's part of sharded gradients; ``taken`` is the
    AccumulatedNorms of the latest ``take()``, whose norms ``ShardedMeasure`` makes whole."""

    def __init__(self, named, wanted, model, report) -> None:
        super().__init__(named, wanted, model, report, reuse=False)
        self.taken: AccumulatedNorms | None = None

    def _measured(self, grads: list, at_step: bool = False) -> AccumulatedNorms:
        parts = [_part_norm(g) for g in grads if g is not None]
        norms = torch.stack([p.to(parts[0].device) for p in parts]) if parts \
            else torch.zeros(0, dtype=torch.float64)
        return AccumulatedNorms([g is not None for g in grads], norms, at_step)

    def take(self) -> AccumulatedNorms:
        self.taken = super().take()
        return self.taken
