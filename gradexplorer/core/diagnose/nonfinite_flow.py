"""Where each NaN/Inf of a forward pass came from: a dispatch mode that follows them op by op.

``NonFiniteFlow`` watches every op of a replayed forward pass (a ``TorchDispatchMode``, beneath
autograd, so in-place ops are seen too). It looks at each op's floating inputs *before* the op
runs — an in-place ``sqrt_``, ``log_``, ``masked_fill_`` or ``x[i] = nan`` overwrites them —
and at its outputs after. Each non-finite output gets a *source*:

- inherited from the op's non-finite inputs that carry one: those holding NaN when the output
  holds NaN (a NaN is not made of another input's -inf mask), else those holding ±Inf; of
  these, one whose NaN/Inf no op has yet made finite again before one that was (a -inf mask
  softmax absorbed meeting an overflow's +Inf: the overflow); the earliest born among them;
- else the op itself, a *birth*: its floating inputs were finite, or the only non-finite ones
  came from outside the watched ops (a NaN constant the model keeps as an attribute).

Parameters, buffers and the batch that hold NaN/Inf when the replay begins are sources of their
own (``mark``). A source belongs to the storage the op wrote, so a later read of that memory,
through any view, finds it; a fresh finite output clears its storage's source.

The source of the loss is then the birth whose NaN/Inf reached it. A value that becomes finite
again ends its flow: a -inf attention mask absorbed by softmax, T5's ``log(0)`` in its relative
position buckets turned into integers and clamped, dropout's ``empty_like`` buffer before
``bernoulli_`` fills it — each is a birth, none is ever the loss's source.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from gradexplorer.core.diagnose.eager_replay import user_path

# ops that do not read the values of the tensor they write (its old NaN is not passed on)
_WRITE_ONLY = frozenset({"copy_", "fill_", "zero_", "normal_", "uniform_", "bernoulli_",
                         "exponential_", "geometric_", "log_normal_", "cauchy_", "random_",
                         "set_", "resize_", "resize_as_"})
# ops that read no input's values, only its shape, dtype and device
_READ_NOTHING = frozenset({"empty_like", "zeros_like", "ones_like", "full_like", "rand_like",
                           "randn_like", "randint_like", "new_empty", "new_zeros", "new_ones",
                           "new_full", "new_empty_strided"})
# ops that only bring a tensor made outside the watched ops in (``torch.tensor(nan)``)
_LIFTS = frozenset({"lift_fresh", "lift_fresh_copy", "lift", "detach", "alias"})


@dataclass(frozen=True)
class Source:
    """Where a NaN/Inf came from: an op of the forward (``kind`` "op": ``op`` in ``module``) or
    what held it when the replay began ("data": a part of the batch, "parameter", "buffer")."""

    kind: str
    name: str  # the op, or the batch part / parameter / buffer name
    module: str = ""  # the innermost module running the op ("" at the model's top level)
    order: int = -1  # position in the forward's ops (sources held before it: negative)
    nan: bool = False  # it made NaN (else only ±Inf)
    constant: bool = False  # an op whose only non-finite inputs came from outside the ops
    detail: str = ""  # what a held source holds: "12 NaN, 1 Inf"


def _floats(values: Any) -> list[torch.Tensor]:
    seen: set[int] = set()
    out = []
    for t in tree_leaves(values):
        if (isinstance(t, torch.Tensor) and t.is_floating_point() and t.layout == torch.strided
                and t.device.type != "meta" and t.numel() and id(t) not in seen):
            seen.add(id(t))
            out.append(t)
    return out


def _kind(t: torch.Tensor) -> tuple[bool, bool] | None:
    """(holds NaN, holds ±Inf), or None when every value is finite."""
    if bool(torch.isfinite(t).all()):
        return None
    return bool(torch.isnan(t).any()), bool(torch.isinf(t).any())


def _key(t: torch.Tensor) -> tuple | None:
    try:
        return t.device, t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # a tensor without storage (functional wrappers)
        return None


def _written(func, args: tuple, kwargs: dict) -> list[torch.Tensor]:
    """The tensor arguments the op's schema says it writes (``self`` of ``sqrt_``, ``out=``)."""
    written = []
    try:
        schema_args = func._schema.arguments
    except AttributeError:
        return written
    for i, arg in enumerate(schema_args):
        if arg.alias_info is None or not arg.alias_info.is_write:
            continue
        value = args[i] if i < len(args) and not arg.kwarg_only else kwargs.get(arg.name)
        written.extend(_floats(value))
    return written


class NonFiniteFlow(TorchDispatchMode):
    """The dispatch mode; ``source_of(tensor)`` after the forward (see the module's text).

    ``where`` returns the innermost module running now (``ModuleAttribution.current``).
    """

    def __init__(self, where: Callable[[], str] = lambda: "") -> None:
        super().__init__()
        self.where = where
        self._sources: dict[tuple, Source] = {}
        self._ops = itertools.count()
        self._held = itertools.count(-1_000_000)  # sources held before the forward, in marking order
        self._absorbed: set[Source] = set()  # sources whose NaN/Inf some op turned finite
        self.births: list[Source] = []  # every op that made NaN/Inf of finite inputs, in order
        self.loss_finite: bool | None = None  # after ``reached``
        self.loss_source: Source | None = None

    # -- sources held before the forward ---------------------------------------------
    def mark(self, kind: str, named: list[tuple[str, Any]]) -> list[str]:
        """Note the tensors of ``named`` (name, tensor or nest of them) that hold NaN/Inf as
        sources of ``kind``; returns their names."""
        found = []
        for name, value in named:
            order = next(self._held)
            bad = [(t, kind_of) for t in _floats(value) for kind_of in [_kind(t)] if kind_of is not None]
            if not bad:
                continue
            nan = sum(int(torch.isnan(t).sum()) for t, _ in bad)
            inf = sum(int(torch.isinf(t).sum()) for t, _ in bad)
            detail = ", ".join(f"{n:,} {what}" for n, what in ((nan, "NaN"), (inf, "Inf")) if n)
            for t, kind_of in bad:
                if _key(t) is not None:
                    self._sources[_key(t)] = Source(kind, name, order=order, nan=kind_of[0],
                                                    detail=detail)
            found.append(name)
        return found

    def mark_held(self, model: torch.nn.Module, batch: tuple[Any, Any]) -> None:
        """Note what holds NaN/Inf as the replay begins: the batch (its inputs by position or
        keyword, its target), the parameters, the buffers — in that order of precedence."""
        inputs, target = batch
        if isinstance(inputs, dict):
            named = list(inputs.items())
        else:
            named = [("inputs" if len(inputs) == 1 else f"inputs[{i}]", v) for i, v in enumerate(inputs)]
        self.mark("data", [*named, *([("target", target)] if target is not None else [])])
        self.mark("parameter", [(user_path(n), p) for n, p in model.named_parameters()])
        self.mark("buffer", [(user_path(n), b) for n, b in model.named_buffers()])

    def reached(self, loss: torch.Tensor) -> None:
        """The forward is over: note where the loss's NaN/Inf came from (``loss_source``)."""
        self.loss_finite = _kind(loss.detach()) is None
        self.loss_source = None if self.loss_finite else self.source_of(loss)

    def source_of(self, t: torch.Tensor) -> Source | None:
        """Where the NaN/Inf ``t`` holds came from (None: finite, or not followed)."""
        key = _key(t)
        return None if key is None or _kind(t) is None else self._sources.get(key)

    def saved_source(self, node) -> Source | None:
        """Where the NaN/Inf an autograd node saved from the forward came from (the earliest
        born, when it saved several), or None: its saved tensors were finite."""
        sources = []
        for attr in dir(node):
            if attr.startswith("_saved_"):
                try:
                    value = getattr(node, attr)
                except RuntimeError:  # freed, or not readable after the backward
                    continue
                sources.extend(s for t in _floats(value) for s in [self.source_of(t)] if s is not None)
        return min(sources, key=lambda s: s.order) if sources else None

    # -- the ops -------------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        if name in _LIFTS:
            return func(*args, **kwargs)
        written = _written(func, args, kwargs)
        unread, updated = _unread(func, name, args, kwargs, written)
        written += updated
        bad_in = [(t, kind) for t in _floats((args, kwargs)) if id(t) not in unread
                  for kind in [_kind(t)] if kind is not None]  # before an in-place op runs
        inherited = [(self._sources.get(_key(t)), kind) for t, kind in bad_in]
        out = func(*args, **kwargs)
        order = next(self._ops)
        returned = _floats(out)
        view = _is_view(func)
        aliases = {id(t) for t in returned} if view else {id(t) for t in written}
        finite = True
        for t in [*returned, *(w for w in written if all(w is not r for r in returned))]:
            key = _key(t)
            if key is None:
                continue
            kind = _kind(t)
            if kind is not None:
                finite = False
                self._sources[key] = self._source(name, kind[0], order, inherited)
            elif id(t) not in aliases:
                self._sources.pop(key, None)  # new memory, finite: an older source is stale
        if finite and returned and not view:  # NaN/Inf in, none out: masked, clamped, absorbed
            self._absorbed.update(s for s, _ in inherited if s is not None)
        return out

    def _source(self, op: str, nan: bool, order: int,
                inherited: list[tuple[Source | None, tuple[bool, bool]]]) -> Source:
        """The source of an output (NaN if ``nan``) of ``op``, from its inputs' sources."""
        known = [(s, kind) for s, kind in inherited if s is not None]
        alike = [s for s, (has_nan, _) in known if has_nan] if nan else []
        alike = alike or [s for s, (_, has_inf) in known if has_inf] or [s for s, _ in known]
        if alike:  # a source some op already made finite again (a mask) yields to one not
            flowing = [s for s in alike if s not in self._absorbed]
            return min(flowing or alike, key=lambda s: s.order)
        birth = Source("op", op, self.where(), order, nan, constant=bool(inherited))
        self.births.append(birth)
        return birth


def _unread(func, name: str, args: tuple, kwargs: dict,
            written: list[torch.Tensor]) -> tuple[set[int], list[torch.Tensor]]:
    """The ids of the tensor arguments whose values the op does not read — what a write-only op
    (``fill_``, ``bernoulli_``, ``copy_``'s target) overwrites, a batch norm's running
    statistics in training mode (updated, never used for the output) — and the tensors it
    writes that its schema does not say (those running statistics)."""
    if name in _READ_NOTHING:
        return {id(t) for t in _floats((args, kwargs))}, []
    unread = {id(t) for t in written} if name in _WRITE_ONLY else set()
    if "batch_norm" not in name:
        return unread, []
    try:
        names = [a.name for a in func._schema.arguments]
    except AttributeError:
        return unread, []
    bound = dict(zip(names, args, strict=False)) | kwargs
    if bound.get("training", name == "_batch_norm_with_update") is not True:
        return unread, []
    stats = [t for n in ("running_mean", "running_var") for t in _floats(bound.get(n))]
    return unread | {id(t) for t in stats}, [t for t in stats if all(t is not w for w in written)]


def _is_view(func) -> bool:
    """Whether the op returns a view of an input (``select``, ``t``), not writing it (``sqrt_``)."""
    try:
        return any(r.alias_info is not None and not r.alias_info.is_write for r in func._schema.returns)
    except AttributeError:
        return False


@contextmanager
def following(flow: NonFiniteFlow | None) -> Iterator[None]:
    """``flow`` watching the ops inside (nothing when None)."""
    if flow is None:
        yield
        return
    with flow:
        yield
