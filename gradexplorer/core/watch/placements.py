"""Which part of a DTensor this rank counts toward the whole tensor's figures.

A DTensor's ``placements`` say, per mesh dimension, how the whole tensor lies on the ranks
along it: ``Shard(d)`` (and FSDP's ``_StridedShard`` beside tensor parallelism's ``Shard`` on
the same tensor dimension): each rank holds a different piece, uneven ones included;
``Replicate()``: each holds the same numbers; ``Partial()``: each holds a term of a sum (or
max, min, norm) still to be reduced. So the whole tensor's figures come from each rank's
local tensor when, on every mesh dimension, a sharded dimension's pieces are all counted,
a replicated one only at coordinate 0 (counted once), and a partial one is first reduced
(``redistribute`` to ``Replicate()``, a collective on the mesh's own groups: exact, the values
the optimizer uses). A rank outside the tensor's mesh counts nothing; a mesh smaller than the
world (tensor parallelism's half of a 2-D mesh, with data parallelism by DDP or by hand) has a
copy on every data-parallel group, and the copy that holds rank 0 counts; a plain tensor among
them is each rank's own copy, and rank 0's counts (as under DDP). Any other placement is
not read: its parameter gets no figure (one warning names it), never a wrong one.
"""

from __future__ import annotations

import torch


def _kinds() -> tuple[tuple[type, ...], type, type]:
    from torch.distributed.tensor import Partial, Replicate, Shard
    from torch.distributed.tensor.placement_types import _StridedShard

    return (Shard, _StridedShard), Replicate, Partial


def is_dtensor(t) -> bool:
    from torch.distributed.tensor import DTensor

    return isinstance(t, DTensor)


def unreadable(placements) -> list:
    """The placements whose pieces cannot be combined into the whole tensor's figures."""
    shard, replicate, partial = _kinds()
    return [p for p in placements if not isinstance(p, (*shard, replicate, partial))]


def placement_text(placements) -> str:
    return "(" + ", ".join(map(repr, placements)) + ")"


def counted(placements, coordinate, copy_of_rank_0: bool = True) -> bool:
    """Whether this rank's local tensor (at ``coordinate`` of the mesh, None outside it) counts
    toward the whole tensor: every replicated mesh dimension at its first coordinate, in the
    copy of the mesh that holds rank 0 (``copy_of_rank_0``: a mesh smaller than the world, such
    as the ``tp`` half of a 2-D mesh under DDP or a hand-made data parallelism, has a copy on
    each data-parallel group; rank 0's is counted, as under DDP)."""
    if coordinate is None or not copy_of_rank_0:
        return False
    _, replicate, _ = _kinds()
    return all(c == 0 for p, c in zip(placements, coordinate, strict=True)
               if isinstance(p, replicate))


def reduced(t):
    """``t`` with every ``Partial()`` placement reduced (``Replicate()`` there)."""
    shard, replicate, partial = _kinds()
    if not any(isinstance(p, partial) for p in t.placements):
        return t
    return t.redistribute(t.device_mesh, [replicate() if isinstance(p, partial) else p
                                          for p in t.placements])


def _rank() -> int:
    import torch.distributed as dist

    return dist.get_rank() if dist.is_initialized() else 0


def counted_local(t: torch.Tensor | None) -> torch.Tensor | None:
    """The flat local numbers this rank counts toward the whole of ``t`` (a plain tensor: all
    of it; a DTensor: see the module's docstring; empty where the rank counts none). Raises
    ``UnreadablePlacement`` for a placement it cannot combine."""
    if t is None:
        return None
    if not is_dtensor(t):  # a plain tensor beside sharded ones: every rank holds its own copy,
        flat = t.detach().reshape(-1)  # rank 0's is counted (as under DDP)
        return flat if _rank() == 0 else flat[:0]
    if unreadable(t.placements):
        raise UnreadablePlacement(placement_text(t.placements))
    t = reduced(t.detach())
    local = t.to_local().detach().reshape(-1)
    mesh = t.device_mesh
    return local if counted(t.placements, mesh.get_coordinate(),
                            bool((mesh.mesh == 0).any())) else local[:0]


class UnreadablePlacement(ValueError):
    """A DTensor placement whose pieces cannot be combined exactly (its text is the message)."""
