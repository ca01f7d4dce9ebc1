"""Each supported layer's per-sample gradient terms (``terms.Block``) from its input (kept by a
forward hook) and its output's gradient (a tensor hook), for samples along dimension 0.

Supported: nn.Linear (inputs [N, ..., in]: positions summed), transformers' Conv1D (a Linear
with its weight transposed; recognised only when transformers is already imported),
nn.Conv1d/2d (unfolded patches: stride, padding and its modes, dilation, groups),
nn.Embedding (the equal-ids identity; padding_idx has no gradient), nn.LayerNorm, nn.RMSNorm,
nn.GroupNorm and a BatchNorm in eval mode (their per-sample weight gradient Σ_t g_t ⊙ x̂_t is
computed directly). nn.MultiheadAttention, which uses its parameters without calling a
submodule, is ``attention.py``'s. ``unsupported_reason`` names what is not, and why.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from gradexplorer.core.persample.terms import Block

BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)
NORMS = (nn.LayerNorm, nn.RMSNorm, nn.GroupNorm, *BATCH_NORMS)


def transformers_conv1d() -> type | None:
    """transformers' Conv1D class, only where transformers is already imported."""
    utils = sys.modules.get("transformers.pytorch_utils")
    return getattr(utils, "Conv1D", None) if utils is not None else None


def kind_of(module: nn.Module) -> str | None:
    """The layer kind the terms are made for, or None."""
    conv1d = transformers_conv1d()
    if conv1d is not None and isinstance(module, conv1d):
        return "conv1d_t"
    if isinstance(module, nn.Linear):
        return "linear"
    if isinstance(module, (nn.Conv1d, nn.Conv2d)):
        return "conv"
    if isinstance(module, nn.Embedding):
        return "embedding"
    if isinstance(module, NORMS):
        return "norm"
    return None


def unsupported_reason(module: nn.Module) -> str | None:
    """Why ``module``'s own parameters get no per-sample norm (None: they do)."""
    kind = kind_of(module)
    if kind is None:
        return f"{type(module).__name__} is not supported"
    if kind == "embedding" and module.scale_grad_by_freq:
        return "Embedding with scale_grad_by_freq (its gradient depends on the whole batch)"
    if isinstance(module, BATCH_NORMS) and not module.track_running_stats:
        return f"{type(module).__name__} without running statistics mixes samples"
    return None


def batched_rank(module: nn.Module, kind: str) -> int:
    """The fewest dimensions of a batched input of ``module`` (samples along dimension 0)."""
    if kind == "embedding":
        return 1
    if kind == "conv":
        return len(module.kernel_size) + 2
    if isinstance(module, (nn.LayerNorm, nn.RMSNorm)):
        return len(module.normalized_shape) + 1
    return 2


def mixes_samples(module: nn.Module) -> bool:
    """A BatchNorm in train mode: every sample's gradient depends on the others."""
    return isinstance(module, BATCH_NORMS) and module.training


def blocks_for(module: nn.Module, kind: str, x: torch.Tensor, g: torch.Tensor
               ) -> list[tuple[nn.Parameter, int, Block, int]]:
    """``(parameter, part, Block, budget)`` for each trainable parameter of ``module``."""
    n = x.shape[0]
    budget = x.numel() + g.numel()
    out = []

    def add(param, part, make: Callable[[], Block]):
        if param is not None and param.requires_grad:
            out.append((param, part, make(), budget))

    if kind in ("linear", "conv1d_t"):
        a, go = x.reshape(n, -1, x.shape[-1]), g.reshape(n, -1, g.shape[-1])
        add(module.weight, 0, (lambda: Block(u=go, v=a)) if kind == "linear"
            else (lambda: Block(u=a, v=go)))
        add(module.bias, 0, lambda: Block(u=go))
    elif kind == "embedding":
        ids, go = x.reshape(n, -1), g.reshape(n, -1, g.shape[-1])
        if module.padding_idx is not None:
            go = go * (ids != module.padding_idx).unsqueeze(-1).to(go.dtype)
        add(module.weight, 0, lambda: Block(ids=ids, v=go, rows=module.num_embeddings))
    elif kind == "conv":
        groups, c_out = module.groups, module.out_channels
        go = g.reshape(n, groups, c_out // groups, -1)
        for j in range(groups):
            add(module.weight, j, lambda j=j: Block(u=go[:, j].transpose(1, 2),
                                                    v=Unfolded(module, x, j)))
        add(module.bias, 0, lambda: Block(u=g.reshape(n, c_out, -1).transpose(1, 2)))
    else:
        weight, bias = _norm_directs(module, x, g, budget)
        add(module.weight, 0, lambda: Block(direct=weight))
        add(getattr(module, "bias", None), 0, lambda: Block(direct=bias))
    return out


class Unfolded:
    """A convolution's patches [n, L, C/groups·K] for one group, made a slice of samples at a
    time (``terms`` asks for ``v[s]``): never the whole batch's patches at once."""

    def __init__(self, module: nn.Module, x: torch.Tensor, group: int) -> None:
        self.module, self.x, self.group = module, x, group
        self.shape = (x.shape[0], *self._patches(x[:1]).shape[1:])

    def __getitem__(self, s: slice) -> torch.Tensor:
        return self._patches(self.x[s])

    def _patches(self, x: torch.Tensor) -> torch.Tensor:
        """Strided windows (a view) copied once into [n, L, C·K] (im2col is slower on CPU)."""
        m = self.module
        per_group = x.shape[1] // m.groups
        x = x[:, self.group * per_group:(self.group + 1) * per_group]
        mode = "constant" if m.padding_mode == "zeros" else m.padding_mode
        x = F.pad(x, m._reversed_padding_repeated_twice, mode=mode)
        spatial = len(m.kernel_size)
        for i, (k, s, d) in enumerate(zip(m.kernel_size, m.stride, m.dilation, strict=True)):
            x = x.unfold(2 + i, d * (k - 1) + 1, s)  # [n, C, L1.., (window)]
            if d > 1:
                x = x[..., ::d]
        # [n, C, L1, .., k1, ..] -> [n, L1, .., C, k1, ..] -> [n, L, C·K]
        order = (0, *range(2, 2 + spatial), 1, *range(2 + spatial, 2 + 2 * spatial))
        x = x.permute(order)
        return x.reshape(x.shape[0], -1, per_group * math.prod(m.kernel_size))


def _norm_directs(module: nn.Module, x: torch.Tensor, g: torch.Tensor, budget: int):
    """Per-sample weight and bias gradients [n, P] of a normalisation layer, a chunk of
    samples at a time (x̂ is recomputed from the kept input)."""
    n = x.shape[0]
    weights, biases = [], []
    step = max(1, budget // max(2 * x[0].numel(), 1))
    for start in range(0, n, step):
        xs, gs = x[start:start + step].to(g.dtype), g[start:start + step]
        xhat, channel = _normalised(module, xs)
        if channel:  # per channel (dimension 1): summed over the other dimensions
            dims = tuple(range(2, xs.dim()))
            weights.append((gs * xhat).sum(dims) if dims else gs * xhat)
            biases.append(gs.sum(dims) if dims else gs)
        else:  # over the normalised shape: summed over the leading positions
            lead = xs.dim() - len(module.normalized_shape)
            weights.append((gs * xhat).reshape(len(xs), -1, *xs.shape[lead:]).sum(1).flatten(1))
            biases.append(gs.reshape(len(xs), -1, *xs.shape[lead:]).sum(1).flatten(1))
    return torch.cat(weights), torch.cat(biases)


def _normalised(module: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """(x̂, per channel?) as the layer's forward normalised ``x``."""
    with torch.no_grad():
        if isinstance(module, nn.LayerNorm):
            return F.layer_norm(x, module.normalized_shape, None, None, module.eps), False
        if isinstance(module, nn.RMSNorm):
            dims = tuple(range(x.dim() - len(module.normalized_shape), x.dim()))
            eps = module.eps if module.eps is not None else torch.finfo(x.dtype).eps
            return x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + eps), False
        if isinstance(module, nn.GroupNorm):
            return F.group_norm(x, module.num_groups, None, None, module.eps), True
        shape = (1, -1, *([1] * (x.dim() - 2)))
        mean = module.running_mean.to(x.dtype).view(shape)
        var = module.running_var.to(x.dtype).view(shape)
        return (x - mean) * torch.rsqrt(var + module.eps), True
