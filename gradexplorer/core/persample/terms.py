"""Per-sample squared gradient norms of one parameter from its terms, never materialising more
than a bounded slice of per-sample gradients.

A parameter's gradient for sample i is a sum of *terms* over positions (tokens, pixels, uses of
a shared weight): ``Σ_t u_t ⊗ v_t`` for a Linear (u the output gradient, v the input), an
Embedding (u the one-hot of the id, v the output gradient), a convolution (v an unfolded
patch); a bias has v = 1. A normalisation layer's weight gradient is given whole: a ``direct``
vector per sample. A ``Block`` holds one module call's terms for all samples; a parameter
used by several calls (tied weights, a module called twice) has several blocks, and their
cross terms are part of the norm:

    ‖Σ_t u_t ⊗ v_t‖² = Σ_{t,s} (u_t·u_s)(v_t·v_s)        (the Gram identity)

computed per sample in chunks of samples, or, where the positions are many (T·(p+q) > p·q:
fewer multiply-adds), by materialising each sample's p×q gradient, a chunk of samples at a
time. Every chunk is bounded by ``budget`` elements (the caller gives the size of what is
already live: the layer's input and output gradient).

Blocks that cover different row blocks of a parameter (``span``: an attention's packed
in-projection used whole by one call, as q and k/v blocks by another) are cut at every block
edge: the rows' gradients are disjoint, so their squared norms add.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Block:
    """One call's terms for ``n`` samples: ``u`` dense [n, T, p] or ``ids`` [n, T] (one-hot
    rows of a ``p``-row table), ``v`` dense [n, T, q] or None (a bias: v = 1); or ``direct``
    [n, P], the per-sample gradient itself."""

    u: torch.Tensor | None = None
    ids: torch.Tensor | None = None
    v: torch.Tensor | None = None
    direct: torch.Tensor | None = None
    rows: int = 0  # p where u is given by ids
    span: tuple[int, int] | None = None  # the parameter's rows u covers (None: all of them)

    @property
    def samples(self) -> int:
        first = self.direct if self.direct is not None else (self.u if self.u is not None
                                                             else self.ids)
        return first.shape[0]

    @property
    def positions(self) -> int:
        return (self.u if self.u is not None else self.ids).shape[1]

    @property
    def p(self) -> int:
        return self.u.shape[2] if self.u is not None else self.rows

    @property
    def q(self) -> int:
        return 1 if self.v is None else self.v.shape[2]


def wide(t: torch.Tensor | None) -> torch.Tensor | None:
    """Half precision is summed in float32 (the norms of a bf16 model still mean something)."""
    if t is None or not t.is_floating_point() or t.dtype in (torch.float32, torch.float64):
        return t
    return t.float()


def squared_norms(blocks: list[Block], budget: int) -> torch.Tensor:
    """Per-sample ‖∇θ ℓ_i‖² (float64 [n]) of a parameter whose terms are ``blocks``."""
    if len({_span(b) for b in blocks}) > 1:
        return _by_rows(blocks, budget)
    if all(b.direct is not None for b in blocks):
        total = wide(blocks[0].direct)
        for b in blocks[1:]:
            total = total + wide(b.direct)
        return total.double().pow(2).sum(1)
    if any(b.direct is not None for b in blocks):
        raise ValueError("a parameter used both as a whole vector and as outer products")
    n = blocks[0].samples
    positions = sum(b.positions for b in blocks)
    p, q = blocks[0].p, blocks[0].q
    budget = max(int(budget), 1)
    # multiply-adds a sample: the Gram identity T²·(p+q), the per-sample gradient T·p·q
    if positions * (p + q) <= p * q:
        return _gram(blocks, n, positions, budget)
    return _materialised(blocks, n, p, q, budget)


def _span(b: Block) -> tuple[int, int]:
    return b.span if b.span is not None else (0, b.p)


def _by_rows(blocks: list[Block], budget: int) -> torch.Tensor:
    """The squared norms of the row blocks between every block's edges, summed."""
    edges = sorted({e for b in blocks for e in _span(b)})
    out = None
    for start, stop in zip(edges, edges[1:], strict=False):
        cut = [Block(u=b.u[..., start - _span(b)[0]:stop - _span(b)[0]], v=b.v)
               for b in blocks if _span(b)[0] <= start and stop <= _span(b)[1]]
        if cut:
            part = squared_norms(cut, budget)
            out = part if out is None else out + part
    return out


def _chunks(n: int, per_sample: int, budget: int):
    step = max(1, budget // max(per_sample, 1))
    for start in range(0, n, step):
        yield slice(start, min(n, start + step))


def _u_gram(b: Block, c: Block, s: slice) -> torch.Tensor:
    """[n, Tb, Tc]: u_t·u_s between the two blocks' terms of samples ``s``."""
    if b.u is not None and c.u is not None:
        return torch.bmm(wide(b.u[s]), wide(c.u[s]).transpose(1, 2))
    if b.ids is not None and c.ids is not None:
        return (b.ids[s][:, :, None] == c.ids[s][:, None, :]).to(_dtype(b, c))
    if b.u is not None:  # dense against one-hot: u_t[id_s]
        ub, idc = wide(b.u[s]), c.ids[s]
        return torch.gather(ub, 2, idc[:, None, :].expand(-1, ub.shape[1], -1))
    return _u_gram(c, b, s).transpose(1, 2)


def _v_gram(b: Block, c: Block, s: slice) -> torch.Tensor | None:
    if b.v is None:
        return None  # v = 1 on both sides (a bias)
    vb = wide(b.v[s])  # (a convolution's patches are made here: once when c is b)
    return torch.bmm(vb, (vb if c is b else wide(c.v[s])).transpose(1, 2))


def _dtype(b: Block, c: Block) -> torch.dtype:
    for t in (b.v, c.v, b.u, c.u):
        if t is not None:
            return wide(t).dtype
    return torch.float32


def _gram(blocks: list[Block], n: int, positions: int, budget: int) -> torch.Tensor:
    out = None
    for i, b in enumerate(blocks):
        for c in blocks[i:]:
            twice = 1.0 if c is b else 2.0
            made = (b.positions + c.positions) * (b.q + (b.p if b.u is not None else 0))
            for s in _chunks(n, 2 * b.positions * c.positions + made, budget):
                gu = _u_gram(b, c, s)
                gv = _v_gram(b, c, s)
                part = (gu.sum((1, 2)) if gv is None else (gu * gv).sum((1, 2))).double()
                if out is None:
                    out = torch.zeros(n, dtype=torch.float64, device=part.device)
                out[s] += twice * part
    return out


def _materialised(blocks: list[Block], n: int, p: int, q: int, budget: int) -> torch.Tensor:
    """Each sample's p×q gradient, a chunk of samples at a time, then its squared norm."""
    out = None
    for s in _chunks(n, p * q + max(b.positions for b in blocks) * (p + q), budget):
        grad = None
        for b in blocks:
            part = _outer_sum(b, s, p)
            grad = part if grad is None else grad + part
        sq = grad.flatten(1).pow(2).sum(1).double()
        if out is None:
            out = torch.zeros(n, dtype=torch.float64, device=sq.device)
        out[s] = sq
    return out


def _outer_sum(b: Block, s: slice, p: int) -> torch.Tensor:
    """Σ_t u_t ⊗ v_t for samples ``s``: [n, p, q] ([n, p] for a bias)."""
    v = None if b.v is None else wide(b.v[s])
    if b.u is not None:
        u = wide(b.u[s])
        return u.sum(1) if v is None else torch.bmm(u.transpose(1, 2), v)
    ids = b.ids[s]
    n, t = ids.shape
    flat = (ids + torch.arange(n, device=ids.device)[:, None] * p).reshape(-1)
    if v is None:
        out = torch.zeros(n * p, dtype=_dtype(b, b), device=ids.device)
        out.index_add_(0, flat, torch.ones(n * t, dtype=out.dtype, device=ids.device))
        return out.view(n, p)
    out = torch.zeros(n * p, v.shape[2], dtype=v.dtype, device=v.device)
    out.index_add_(0, flat, v.reshape(n * t, -1))
    return out.view(n, p, -1)
