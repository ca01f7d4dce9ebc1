"""FSDP: each rank holds a shard of each gradient; figures are reduced across ranks."""

from __future__ import annotations

from torch import nn


def sharded_plan(model: nn.Module, rank: int, world: int):
    """A RankPlan for an FSDP-sharded model, None when ``model`` is not sharded."""
    return None
