"""Which rank records, under which names, and how a step's figures come together across ranks.

Single process: record everything. DDP: gradients are averaged by backward already, so rank 0
records alone and no collective runs. FSDP2 and tensor parallelism (DTensor gradients, on 1-D
or 2-D meshes): every rank measures the part it counts and the figures are reduced across ranks
(``sharded.py``); rank 0 writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch.distributed as dist
from torch import nn

from gradexplorer.core.stats.records import StepGradients

WRAPPER_PREFIXES = ("_fsdp_wrapped_module.", "_checkpoint_wrapped_module.", "_orig_mod.")


def clean_name(name: str) -> str:
    """A parameter name as the unwrapped model names it."""
    for prefix in WRAPPER_PREFIXES:
        name = name.replace(prefix, "")
    return name


@dataclass
class RankPlan:
    """``model``: the user's module unwrapped; ``stats_model``: whose parameters are measured."""

    mode: str
    model: nn.Module
    stats_model: nn.Module
    rank: int = 0
    world: int = 1
    names: dict[str, str] = field(default_factory=dict)
    per_rank: bool = False
    wrapper: nn.Module | None = None  # the DistributedDataParallel module (DDP)

    @property
    def sharded(self) -> bool:
        """DTensor gradients (FSDP2, tensor parallelism, both): every rank holds a part."""
        return self.mode in ("fsdp2", "tp", "fsdp2+tp")

    @property
    def active(self) -> bool:
        """Whether this rank computes figures (every rank under sharding or with per-rank
        figures, rank 0 otherwise)."""
        return self.sharded or self.per_rank or self.rank == 0

    @property
    def writes(self) -> bool:
        """Whether this rank writes the run directory."""
        return self.rank == 0

    def finish(self, record: StepGradients) -> StepGradients | None:
        """The record to keep, named as the unwrapped model names its parameters."""
        if self.names:
            record.params = {self.names.get(n, n): s for n, s in record.params.items()}
            for s in record.params.values():
                s.name = self.names.get(s.name, s.name)
            record.histograms = {self.names.get(n, n): h for n, h in record.histograms.items()}
        return record


def _is_ddp(model: nn.Module) -> bool:
    from torch.nn.parallel import DistributedDataParallel

    return isinstance(model, DistributedDataParallel)


def plan_ranks(model: nn.Module) -> RankPlan:
    """How to record ``model`` on this process."""
    rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
    from gradexplorer.core.watch.sharded import refuse_ddp_over_tp, refuse_fsdp1, sharded_mode

    if _is_ddp(model):
        refuse_ddp_over_tp(model.module)
        return RankPlan("ddp", model.module, model.module, rank, world, wrapper=model)

    refuse_fsdp1(model)
    names = {n: clean_name(n) for n, _ in model.named_parameters() if clean_name(n) != n}
    mode = (sharded_mode(model) if dist.is_initialized() else None) or "single"
    return RankPlan(mode, model, model, rank, world, names)
