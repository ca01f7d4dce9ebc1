"""Per-sample gradient terms of ``nn.MultiheadAttention``'s parameters.

``nn.MultiheadAttention.forward`` calls ``F.multi_head_attention_forward``, which uses the
module's parameters without calling any submodule: its input projections are ``F.linear`` calls
on ``in_proj_weight`` (whole, for self-attention) or on row blocks of it (``split``/``chunk``
views, for cross-attention), or on ``q/k/v_proj_weight`` (``kdim``/``vdim`` ≠ ``embed_dim``),
with ``in_proj_bias`` or its row blocks; ``out_proj.weight`` is used by one more ``F.linear``;
``bias_k``/``bias_v`` are ``repeat``-ed over the batch and appended to the keys and values.

``AttentionCalls`` is a TorchFunctionMode entered for one MHA call (the tracker's forward pre-hook,
left by its forward hook). It sees ``F.multi_head_attention_forward`` and runs torch's own function
(the same bytecode, ``forward_copy``) with the mode on, so that each ``F.linear``/``repeat`` inside
reaches it; each is called unchanged (the forward's numbers are the unwatched model's). For every
one whose weight is (a row block of) a watched parameter it hands the tracker the call's input,
its output and ``Use``s; the blocks are made when the output's gradient arrives (``blocks``).
Inside ``F.multi_head_attention_forward`` the batch is dimension 1: an input [L, N, E] or
[L·N, E] (rows t·N + b: the out-projection's) is viewed as [N, L, E].
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from gradexplorer.core.persample.terms import Block

PARAMETERS = ("in_proj_weight", "q_proj_weight", "k_proj_weight", "v_proj_weight",
              "in_proj_bias", "bias_k", "bias_v")
SEQUENCE_LAYERS = (nn.MultiheadAttention, nn.TransformerEncoderLayer,
                   nn.TransformerDecoderLayer, nn.Transformer, nn.TransformerEncoder,
                   nn.TransformerDecoder)


@functools.cache
def forward_copy() -> Callable | None:
    """``F.multi_head_attention_forward`` whose override check answers False, so that it runs
    its own body with a TorchFunctionMode on (None where torch's function has no such check)."""
    original = F.multi_head_attention_forward
    code = getattr(original, "__code__", None)
    if code is None or "has_torch_function" not in code.co_names:
        return None
    names = dict(vars(F))
    names["has_torch_function"] = lambda *args: False
    copy = types.FunctionType(code, names, original.__name__, original.__defaults__,
                              original.__closure__)
    copy.__kwdefaults__ = original.__kwdefaults__
    return copy


def unsupported_reason(module: nn.MultiheadAttention) -> str | None:
    """Why an MHA's own parameters get no per-sample norm (None: they do)."""
    if forward_copy() is None:
        return (f"nn.MultiheadAttention is not supported with torch {torch.__version__} "
                "(F.multi_head_attention_forward has another form)")
    if type(module).forward is not nn.MultiheadAttention.forward:
        return f"{type(module).__name__} overrides nn.MultiheadAttention.forward"
    extra = [n for n, p in module.named_parameters(recurse=False) if n not in PARAMETERS]
    if extra:
        return f"{type(module).__name__} has parameters MultiheadAttention does not use: {extra}"
    return None


def sequence_first(module: nn.Module) -> bool:
    """A batch_first=False MHA or transformer layer/model: batched tensors are [L, N, E]."""
    if not isinstance(module, SEQUENCE_LAYERS):
        return False
    if isinstance(module, nn.MultiheadAttention):
        return not module.batch_first
    if isinstance(module, (nn.TransformerEncoder, nn.TransformerDecoder)):
        return len(module.layers) > 0 and sequence_first(module.layers[0])
    if isinstance(module, nn.Transformer):
        return not module.batch_first
    return not module.self_attn.batch_first


def samples_of(module: nn.MultiheadAttention, args: tuple, kwargs: dict) -> int | None:
    """The batch size of an MHA call (None: unbatched, no samples to tell apart)."""
    query = args[0] if args else kwargs.get("query")
    if not isinstance(query, torch.Tensor) or query.dim() != 3:
        return None
    return query.shape[0 if module.batch_first else 1]


def batch_first(t: torch.Tensor, n: int) -> torch.Tensor:
    """A tensor of F.multi_head_attention_forward, [L, N, …] or [L·N, …], as [N, L, …]."""
    if t.dim() >= 3 and t.shape[1] == n:
        return t.transpose(0, 1)
    if t.dim() == 2 and t.shape[0] % n == 0:
        return t.reshape(-1, n, t.shape[1]).transpose(0, 1)
    raise ValueError(f"a tensor of shape {tuple(t.shape)} has no batch of {n} where expected")


@dataclass
class Use:
    """A parameter as one call used it: ``rows`` (start, stop) of its dimension 0, or None
    (the whole parameter); ``bias``: added to the output (no input factor); ``repeat``: the
    parameter repeated over the batch (``bias_k``/``bias_v``: its gradient per sample is the
    output gradient's own row)."""

    param: nn.Parameter
    rows: tuple[int, int] | None = None
    bias: bool = False
    repeat: bool = False


def blocks(uses: list[Use], x: torch.Tensor | None, g: torch.Tensor, n: int
           ) -> list[tuple[nn.Parameter, int, Block, int]]:
    """``(parameter, part, Block, budget)`` for a call's uses, from its input ``x`` and output
    gradient ``g`` (both as F.multi_head_attention_forward has them)."""
    g = batch_first(g, n)
    out = []
    if any(u.repeat for u in uses):  # bias_k.repeat(1, N, 1): [1, N, E] -> [N, 1, E]
        budget = g.numel()
        return [(u.param, 0, Block(direct=g.reshape(n, -1)), budget) for u in uses]
    a = batch_first(x, n)
    budget = a.numel() + g.numel()
    for use in uses:
        block = Block(u=g, span=use.rows) if use.bias else Block(u=g, v=a, span=use.rows)
        out.append((use.param, 0, block, budget))
    return out


class AttentionCalls(TorchFunctionMode):
    """On for one MHA call: ``found(uses, x, output)`` for each F.linear/repeat of its watched
    ``params``; ``seen``: the ids of the parameters found; ``error``: a failure to understand a
    call (the call itself still runs)."""

    def __init__(self, params: list[nn.Parameter],
                 found: Callable[[list[Use], torch.Tensor | None, torch.Tensor], None]) -> None:
        super().__init__()
        self.params = {id(p): p for p in params}
        self.found = found
        self.seen: set[int] = set()
        self.error: str | None = None
        self._inside = False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.multi_head_attention_forward and not self._inside:
            self._inside = True
            try:
                with self:
                    return forward_copy()(*args, **kwargs)
            finally:
                self._inside = False
        out = func(*args, **kwargs)
        if func is F.linear or func is torch.Tensor.repeat:
            try:
                self._note(func, args, kwargs, out)
            except Exception as exc:  # noqa: BLE001 - the forward goes on regardless
                self.error = f"{type(exc).__name__}: {exc}"
        return out

    def _note(self, func, args, kwargs, out) -> None:
        if not isinstance(out, torch.Tensor) or not out.requires_grad:
            return
        if func is torch.Tensor.repeat:
            use = self._use(args[0])
            if use is not None:
                use.repeat = True
                self.found([use], None, out)
            return
        x = args[0] if args else kwargs["input"]
        weight = args[1] if len(args) > 1 else kwargs.get("weight")
        bias = args[2] if len(args) > 2 else kwargs.get("bias")
        uses = []
        for t, is_bias in ((weight, False), (bias, True)):
            use = self._use(t)
            if use is not None:
                use.bias = is_bias
                uses.append(use)
        if uses:
            self.found(uses, x.detach(), out)

    def _use(self, t) -> Use | None:
        """The watched parameter ``t`` is, or is a row block of (None: neither)."""
        if not isinstance(t, torch.Tensor):
            return None
        param = self.params.get(id(t))
        if param is None:
            param = self.params.get(id(t._base)) if t._base is not None else None
            if param is None:
                return None
            if t.shape[1:] != param.shape[1:] or t.stride() != param.stride():
                raise ValueError(f"a view of shape {tuple(t.shape)} of a parameter of shape "
                                 f"{tuple(param.shape)} is not a block of its rows")
            start = (t.data_ptr() - param.data_ptr()) // (param.stride(0) * param.element_size())
            rows = (start, start + t.shape[0])
        else:
            rows = None
        self.seen.add(id(param))
        return Use(param, rows) if param.requires_grad else None
