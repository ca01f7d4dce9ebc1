"""``PerSampleNorms``: every sample's gradient norm, per module and for the whole model, from
hooks on the supported layers (``layers.py``), without per-sample gradients in memory.

A forward hook keeps each supported module's input and hooks its output; when the output's
gradient arrives the module's terms are made and, once every call that uses a parameter has
its gradient (a tied weight: all its calls), reduced to per-sample squared norms at once, so
nothing is kept past the module's own backward. Samples are dimension 0 of each module's input,
but dimension 1 inside a batch_first=False transformer layer (and of a root model that is one);
nn.MultiheadAttention's calls are seen by ``attention_watch.py``. Forward passes of the root
module are micro-batches: their samples follow one another.

``reduction``: how the loss the backward ran on combines the samples' losses. "mean" (the
step's gradient is the mean of its samples' loss gradients: one batch with a mean loss, or
micro-batches whose mean losses are divided by their count): each figure is multiplied by the
step's sample count, giving the norm of each sample's own loss gradient; "sum": as computed.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.persample import attention as A
from gradexplorer.core.persample import layers as L
from gradexplorer.core.persample.attention_watch import AttentionWatch
from gradexplorer.core.persample.record import PerSampleStep
from gradexplorer.core.persample.terms import squared_norms

REDUCTIONS = ("mean", "sum")



def check_reduction(value: Any) -> str:
    if value not in REDUCTIONS:
        raise UserError(f"per-sample norms: the loss reduction must be 'mean' or 'sum', "
                        f"got {value!r}")
    return value


def samples_first(module: nn.Module, kind: str, x: torch.Tensor, g: torch.Tensor,
                  samples: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` and ``g`` of a module beside batch_first=False layers with the samples in dimension
    0: where they are there, or in dimension 1 of an input with a sequence dimension ([S, N, …]);
    ValueError where neither holds the layers' ``samples``, or both could."""
    if samples is None:
        raise ValueError("no batch_first=False layer ran to tell the batch size")
    first = x.shape[0] == samples
    second = x.dim() > L.batched_rank(module, kind) and x.shape[1] == samples
    if first and second:
        raise ValueError(f"its input {list(x.shape)} has the batch size ({samples}) in dimensions "
                         "0 and 1: which holds the samples cannot be told (give the model "
                         "batch-first inputs, or a sequence length other than the batch size)")
    if second:
        return x.transpose(0, 1), g.transpose(0, 1)
    if first:
        return x, g
    raise ValueError(f"its input {list(x.shape)} has no dimension of the batch's {samples} "
                     "samples where expected")


class _Slot:
    """One forward pass of the root module: its samples and the squared norms found so far."""

    def __init__(self) -> None:
        self.samples: int | None = None
        self.squares: dict[str, torch.Tensor] = {}  # module name -> [n] float64
        self.pending: dict[tuple[int, int], list] = {}  # (id(param), part) -> [expected, blocks]
        self.failed: dict[str, str] = {}  # module name -> why it has no figure this pass


class PerSampleNorms:
    """Per-sample gradient norms of ``model``'s supported modules, gathered per step.

    ``names``: module name -> name to show (the recorder's, under a wrapper); ``active()``:
    whether the step under way is measured (no hook work otherwise). ``unsupported``: module
    name -> reason, for every module with trainable parameters of its own that has no figure.
    """

    def __init__(self, model: nn.Module, reduction: str = "mean", active=None) -> None:
        self.reduction = check_reduction(reduction)
        self.model = model
        self._active = active or (lambda: True)
        self.unsupported: dict[str, str] = {}
        self.modules: list[str] = []
        self._owner: dict[int, str] = {}  # id(param) -> the module name its figure goes to
        self._handles: list = []
        self._slots: list[_Slot] = []
        self._mixing: list[str] = []
        self._sequence_first = {id(m) for layer in model.modules() if A.sequence_first(layer)
                                and not isinstance(layer, nn.MultiheadAttention)
                                for m in layer.modules() if not isinstance(m, A.SEQUENCE_LAYERS)}
        self._root_dim = 1 if A.sequence_first(model) else 0
        # batch_first=False layers inside a model that is none: the model's own modules around
        # them (an embedding, a head) may hold the samples in dimension 0 or 1; the layers say
        # the batch size, and those modules' samples are found from it when their gradient comes
        self._inner_sequence_first = bool(self._sequence_first) and self._root_dim == 0
        left = {id(m) for mha in model.modules() if isinstance(mha, nn.MultiheadAttention)
                and A.unsupported_reason(mha) is not None for m in mha.modules() if m is not mha}
        for name, module in model.named_modules():
            own = [p for p in module.parameters(recurse=False) if p.requires_grad]
            attention = isinstance(module, nn.MultiheadAttention)
            # (an MHA whose in-projection is frozen still calls its trainable out_proj)
            watched = own or attention and any(p.requires_grad for p in module.parameters())
            if not watched and not L.mixes_samples(module):
                continue
            label = f"{name or '(model)'} ({type(module).__name__})"
            reason = ("inside an nn.MultiheadAttention left out, which uses its weights without "
                      "calling it" if id(module) in left else A.unsupported_reason(module)
                      if attention else L.unsupported_reason(module))
            if L.mixes_samples(module) or isinstance(module, L.BATCH_NORMS):
                self._handles.append(module.register_forward_pre_hook(self._check_mixing(label)))
            if not watched:
                continue
            if reason is not None:
                self.unsupported[label] = reason
                continue
            if own:
                self.modules.append(name)
            for p in own:
                self._owner.setdefault(id(p), name)
            if attention:
                self._handles += AttentionWatch(self, name, module).handles
            else:
                self._handles.append(module.register_forward_hook(self._forward(name, module)))
        self._handles.append(model.register_forward_pre_hook(self._new_pass, with_kwargs=True))

    # -- hooks -----------------------------------------------------------------------
    def _check_mixing(self, label: str):
        def hook(module, args):
            if L.mixes_samples(module) and self._active() and torch.is_grad_enabled():
                if label not in self._mixing:
                    self._mixing.append(label)
        return hook

    def _new_pass(self, module, args, kwargs) -> None:
        if self._active() and torch.is_grad_enabled():
            self._slots.append(slot := _Slot())
            first = next((t for t in (*args, *kwargs.values()) if isinstance(t, torch.Tensor)
                          and t.dim() > 0), None)
            slot.samples = None if first is None or first.dim() <= self._root_dim \
                or self._inner_sequence_first else first.shape[self._root_dim]

    def _slot(self) -> _Slot:
        if not self._slots:  # a submodule called without the root module
            self._slots.append(_Slot())
        return self._slots[-1]

    def _forward(self, name: str, module: nn.Module):
        kind = L.kind_of(module)
        turned = id(module) in self._sequence_first  # inside a batch_first=False layer

        def hook(mod, args, output):
            if not (self._active() and torch.is_grad_enabled()) or not args:
                return
            x = args[0]
            if not isinstance(output, torch.Tensor) or not output.requires_grad \
                    or not isinstance(x, torch.Tensor) or x.dim() < L.batched_rank(mod, kind):
                return  # (an unbatched input: no samples to tell apart)
            slot = self._slot()
            if turned and x.dim() >= 3:  # [L, N, …]: the samples are dimension 1
                x, view = x.transpose(0, 1), (lambda g: g.transpose(0, 1))
            else:
                view = None
            if self._inner_sequence_first and not turned:  # dimension 0 or 1: told later
                keys = self._keys(module, kind)
                x = x.detach()
                self.watch_output(slot, name, keys, output, lambda g: L.blocks_for(
                    mod, kind, *samples_first(mod, kind, x, g, slot.samples)))
                return None
            if slot.samples is None:
                slot.samples = x.shape[0]
            if kind == "embedding" and x.shape[0] == 1 < slot.samples:
                # ids shared by the batch (positions): each sample's own copy of the output,
                # so that its gradient arrives per sample (the sum downstream is the same)
                x = x.expand(slot.samples, *x.shape[1:])
                output = output.expand(slot.samples, *output.shape[1:])
                changed = output
            else:
                changed = None
            if x.shape[0] != slot.samples:
                slot.failed[name] = (f"its input's first dimension ({x.shape[0]}) is not the "
                                     f"batch's ({slot.samples})")
                return
            keys = self._keys(module, kind)
            x = x.detach()
            self.watch_output(slot, name, keys, output, lambda g: L.blocks_for(
                mod, kind, x, g if view is None else view(g)))
            return changed
        return hook

    @staticmethod
    def _keys(module: nn.Module, kind: str) -> list[tuple[int, int]]:
        """(id, part) of each trainable parameter of ``module`` (a grouped conv's weight: a
        part per group)."""
        return [(id(p), j) for p in module.parameters(recurse=False) if p.requires_grad
                for j in range(module.groups if kind == "conv" and p is module.weight else 1)]

    def watch_output(self, slot: _Slot, name: str, keys: list, output: torch.Tensor,
                     make) -> None:
        """A call that uses parameters ``keys`` ((id, part)): ``make(output's gradient)`` gives
        its ``(parameter, part, Block, budget)`` when the gradient arrives."""
        for key in keys:
            slot.pending.setdefault(key, [0, []])[0] += 1
        output.register_hook(lambda g: self._arrived(slot, name, make, g))

    def _arrived(self, slot: _Slot, name: str, make, g) -> None:
        try:
            for param, part, block, budget in make(g.detach()):
                entry = slot.pending.get((id(param), part))
                if entry is None:
                    continue
                entry[1].append((block, budget))
                if len(entry[1]) >= entry[0]:
                    self._reduce(slot, (id(param), part))
        except Exception as exc:  # noqa: BLE001 - a monitor never breaks the backward
            slot.failed[name] = f"{type(exc).__name__}: {exc}"
        return None

    def _reduce(self, slot: _Slot, key: tuple[int, int]) -> None:
        _, found = slot.pending.pop(key)
        if not found:
            return
        owner = self._owner.get(key[0], "?")
        try:
            sq = squared_norms([b for b, _ in found], max(budget for _, budget in found))
        except (ValueError, RuntimeError) as exc:
            slot.failed[owner] = f"{type(exc).__name__}: {exc}"
            return
        slot.squares[owner] = slot.squares[owner] + sq if owner in slot.squares else sq

    # -- the step --------------------------------------------------------------------
    def take(self, scale: float | None = None) -> PerSampleStep | None:
        """The step's figures (None when no supported module ran a backward), and a new step.
        ``scale``: a GradScaler's scale the gradients carry (divided out)."""
        scale = float(scale) if scale else None  # (a GradScaler's may be a tensor)
        slots, self._slots = self._slots, []
        mixing, self._mixing = self._mixing, []
        for slot in slots:
            for key in list(slot.pending):
                self._reduce(slot, key)  # calls whose output got no gradient add nothing
        slots = [s for s in slots if s.squares]
        if not slots:
            return None
        total = sum(s.samples for s in slots)
        factor = (float(total) if self.reduction == "mean" else 1.0) / (scale or 1.0)
        names = [n for n in self.modules if any(n in s.squares for s in slots)]
        columns = {}
        for name in names:
            parts = [(s.squares[name] if name in s.squares
                      else torch.zeros(s.samples, dtype=torch.float64)).cpu() for s in slots]
            columns[name] = torch.cat(parts).numpy() * factor ** 2
        failed = {n: why for s in slots for n, why in s.failed.items()}
        return PerSampleStep.from_squares(columns, self.reduction, failed, mixing)

    def discard(self) -> None:
        """Forget the step under way (not measured)."""
        self._slots, self._mixing = [], []

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self.discard()

