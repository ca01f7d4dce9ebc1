"""Per-rank figures under DDP: every rank's own gradient norms, to catch ranks that disagree.

After DDP's all-reduce every rank should hold the same gradients; a rank that skipped the
synchronisation (``no_sync`` left on, a hook that acts on one rank only, a NaN on one rank)
does not. With ``per_rank=True`` every rank measures its gradients with the app's monitor and
one SUM collective of a ``(world, P + 1)`` float64 CPU tensor (each rank fills its own row:
its per-parameter norms and the step number) gives rank 0 every rank's norms to record.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist

from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.stats.records import StepGradients

TIMEOUT = timedelta(seconds=120)


class RankNorms:
    """Gathers each rank's per-parameter gradient norms, on a gloo group of its own."""

    def __init__(self, report) -> None:
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.group = dist.new_group(backend="gloo", timeout=TIMEOUT)
        self.failed = False
        self._report = report

    def gather(self, record: StepGradients) -> dict[int, dict[str, float]] | None:
        """``{rank: {name: norm}}`` (the same on every rank), None once it failed."""
        if self.failed:
            return None
        names = [n for n, s in record.params.items() if s.has_grad]
        table = np.zeros((self.world, len(names) + 1))
        table[self.rank, :-1] = [record.params[n].norm for n in names]
        table[self.rank, -1] = record.step
        tensor = torch.from_numpy(table)
        try:
            dist.all_reduce(tensor, group=self.group)
            if not np.all(table[:, -1] == record.step):
                raise ValueError(f"ranks are at different steps (this rank at {record.step})")
        except (RuntimeError, ValueError) as exc:
            self.failed = True
            self._report(f"gradexplorer: per-rank figures stopped on rank {self.rank}: "
                         f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}; "
                         "training goes on")
            return None
        return {r: dict(zip(names, table[r, :-1].tolist(), strict=True)) for r in range(self.world)}


def spread(norms: dict[int, dict[str, float]]) -> dict[str, float]:
    """Per parameter: (max − min) / max over ranks of its norm (0 where the ranks agree)."""
    out = {}
    for name in next(iter(norms.values()), {}):
        values = [norms[r][name] for r in norms]
        top = max(values)
        out[name] = (top - min(values)) / top if top > 0 else 0.0
    return out


def rank_norms_for(plan, wanted: bool, report) -> RankNorms | None:
    """A RankNorms gatherer when per-rank figures are asked for and apply (DDP)."""
    if not wanted or plan.world == 1:
        return None
    if plan.sharded:
        raise UserError("watch: per_rank compares whole gradients across DDP ranks; "
                        "FSDP and tensor-parallel ranks hold different shards")
    plan.per_rank = True
    return RankNorms(report)
