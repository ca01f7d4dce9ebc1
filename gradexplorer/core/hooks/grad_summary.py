"""Summaries of the gradient tuples a full backward hook sees, kept on the device until read."""

from __future__ import annotations

from typing import Any

import torch

from gradexplorer.core.stats.measured import measured_tensor

FIELDS = ("norm", "mean", "std", "abs_max")
Summary = tuple[list[int], tuple[torch.Tensor, ...]]


def summarize(grad: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``(norm, mean, std, min, max)`` of one gradient as 0-d tensors on its device (no sync)."""
    g = grad.detach()
    if g.numel() == 0:
        zero = torch.zeros((), device=g.device)
        return (zero,) * 5
    std, mean = torch.std_mean(g, correction=0)  # ddof=0, as the gradient statistics
    low, high = torch.aminmax(g)
    return torch.linalg.vector_norm(g), mean, std, low, high


def summarize_tuple(grads: tuple) -> list[Summary | None]:
    """Per entry: ``(shape, summary tensors)``, or None where the entry is not a tensor."""
    return [
        (list(g.shape), summarize(g)) if isinstance(g, torch.Tensor) else None for g in grads
    ]


def as_floats(summaries: list[Summary | None]) -> list[dict[str, Any] | None]:
    """Turn ``summarize_tuple`` output into plain dicts of floats (one device sync)."""
    present = [s for s in summaries if s is not None]
    flat = [t.float() for _, parts in present for t in parts]
    values = iter(torch.stack(flat).tolist() if flat else [])
    out: list[dict[str, Any] | None] = []
    for s in summaries:
        if s is None:
            out.append(None)
            continue
        norm, mean, std, low, high = (next(values) for _ in range(5))
        out.append({"shape": s[0], "norm": norm, "mean": mean, "std": std,
                    "abs_max": max(abs(low), abs(high))})
    return out


def total_norm(grads: tuple) -> torch.Tensor | None:
    """L2 norm of every tensor in ``grads`` together; None when there is none."""
    tensors = [measured_tensor(g) for g in grads if isinstance(g, torch.Tensor)]
    if not tensors:
        return None
    norms = torch.stack([torch.linalg.vector_norm(t.float()) for t in tensors])
    return torch.linalg.vector_norm(norms)
