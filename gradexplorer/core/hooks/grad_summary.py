"""Summaries of the gradient tuples a full backward hook sees, kept on the device until read."""

from __future__ import annotations

from typing import Any

import torch

FIELDS = ("norm", "mean", "std", "abs_max")


def summarize(grad: torch.Tensor) -> torch.Tensor:
    """``[norm, mean, std, abs_max]`` of one gradient as a float tensor on its device (no sync)."""
    g = grad.detach().float()
    if g.numel() == 0:
        return torch.zeros(len(FIELDS), device=g.device)
    std = g.std() if g.numel() > 1 else torch.zeros((), device=g.device)
    return torch.stack((torch.linalg.vector_norm(g), g.mean(), std, g.abs().amax()))


def summarize_tuple(grads: tuple) -> list[Summary | None]:
    """Per entry: ``(shape, summary tensor)``, or None where the entry is not a tensor."""
    return [
        (list(g.shape), summarize(g)) if isinstance(g, torch.Tensor) else None for g in grads
    ]


Summary = tuple[list[int], torch.Tensor]


def as_floats(summaries: list[Summary | None]) -> list[dict[str, Any] | None]:
    """Turn ``summarize_tuple`` output into plain dicts of floats (one device sync)."""
    present = [s for s in summaries if s is not None]
    values = torch.stack([t for _, t in present]).tolist() if present else []
    out: list[dict[str, Any] | None] = []
    it = iter(values)
    for s in summaries:
        if s is None:
            out.append(None)
            continue
        row = next(it)
        out.append({"shape": s[0], **dict(zip(FIELDS, row, strict=True))})
    return out


def total_norm(grads: tuple) -> torch.Tensor | None:
    """L2 norm of every tensor in ``grads`` together; None when there is none."""
    tensors = [g.detach() for g in grads if isinstance(g, torch.Tensor)]
    if not tensors:
        return None
    norms = torch.stack([torch.linalg.vector_norm(t.float()) for t in tensors])
    return torch.linalg.vector_norm(norms)
