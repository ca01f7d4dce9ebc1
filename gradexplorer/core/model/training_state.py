"""Run something on a model without leaving a trace: buffers, random state (and gradients)
restored; the random state of a step, to replay it (NaN origin), redo it (a hook that broke
it) or to run two arms in lockstep (A/B)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn


def rng_snapshot(device: torch.device | None = None) -> dict:
    """The CPU random state, and CUDA's (every device) when the step runs there or CUDA is in
    use, and MPS's when the step runs there: to replay a step's forward with ``restore_rng``."""
    on = device.type if device is not None else "cpu"
    cuda = torch.cuda.is_available() and (on == "cuda" or torch.cuda.is_initialized())
    return {"cpu": torch.random.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if cuda else None,
            "mps": torch.mps.get_rng_state() if on == "mps" else None}


def restore_rng(state: dict) -> None:
    """Set the random state ``rng_snapshot`` took."""
    torch.random.set_rng_state(state["cpu"])
    if state.get("cuda") is not None:
        torch.cuda.set_rng_state_all(state["cuda"])
    if state.get("mps") is not None:
        torch.mps.set_rng_state(state["mps"])


class SavedState:
    """The buffers (BatchNorm running stats, counters), the RNG streams and, with
    ``grads=True``, the parameters' ``.grad`` of a moment, restorable.

    A forward pass in training mode updates BatchNorm statistics and draws dropout masks; a
    backward that fails half-way has added to some gradients. ``restore()`` puts the model and
    the random streams (CPU, and CUDA and MPS where in use) back as they were, so the next
    attempt is the one it would have been: each buffer is the same tensor in its module again,
    with its values (a forward that replaced one, ``self.count = self.count + 1``, is undone
    too), and each ``.grad`` is the tensor it was (None where it was None), with its values.
    """

    def __init__(self, model: nn.Module, device: torch.device | None = None,
                 grads: bool = False) -> None:
        copies: dict[int, torch.Tensor] = {}  # a buffer shared by two modules is copied once
        self._buffers = [(module, name, b, copies.setdefault(id(b), b.detach().clone()))
                         for module in model.modules()
                         for name, b in module._buffers.items() if b is not None]
        self._rng = rng_snapshot(device)
        self._grads = [(p, p.grad, None if p.grad is None else p.grad.detach().clone())
                       for p in model.parameters()] if grads else []

    def restore(self) -> None:
        with torch.no_grad():
            for module, name, buffer, saved in self._buffers:
                module._buffers[name] = buffer
                buffer.copy_(saved)
            for param, grad, saved in self._grads:
                if grad is not None:
                    grad.copy_(saved)
                param.grad = grad
        restore_rng(self._rng)


@contextmanager
def preserved_state(model: nn.Module, device: torch.device | None = None) -> Iterator[None]:
    """Restore every buffer and the RNG state on exit (see ``SavedState``)."""
    saved = SavedState(model, device)
    try:
        yield
    finally:
        saved.restore()


class KeptBuffers:
    """The model's buffers as they were at a moment (``keep``), to replay a step from them.

    A forward pass writes BatchNorm statistics and counters as it goes; one whose activations
    turned NaN writes NaN there. ``keep()`` at the start of a step copies every buffer into
    storage made once (one fused copy, no host sync, no walk over the modules; nothing for a
    model without buffers; a buffer the model replaced since, ``self.count = self.count + 1``,
    is copied afresh), and ``restore()`` puts those values back, so a replay starts from the
    step's own state (inside ``preserved_state``, which gives the model its own afterwards).
    """

    def __init__(self, model: nn.Module) -> None:
        self._slots = [(m, name) for m in model.modules() for name, b in m._buffers.items()
                       if b is not None]
        self._kept: list[torch.Tensor | None] = [None] * len(self._slots)  # the tensors copied
        self._copies: list[torch.Tensor | None] = [None] * len(self._slots)
        self.keep()

    def keep(self) -> None:
        if not self._slots:
            return
        current = [m._buffers.get(name) for m, name in self._slots]
        with torch.no_grad():
            for i, (b, kept) in enumerate(zip(current, self._kept, strict=True)):
                if b is not kept:  # new, or replaced by the model: its own copy
                    self._copies[i] = None if b is None else b.detach().clone()
            pairs = [(c, b) for b, kept, c in zip(current, self._kept, self._copies, strict=True)
                     if b is not None and b is kept]
            if pairs:
                torch._foreach_copy_([c for c, _ in pairs], [b for _, b in pairs])
        self._kept = current

    def restore(self) -> None:
        """Put the kept values back into the model's buffers (a buffer replaced since, or of
        another shape now, is replaced by a copy of the kept one)."""
        with torch.no_grad():
            for (m, name), copy in zip(self._slots, self._copies, strict=True):
                if copy is None:
                    continue
                b = m._buffers.get(name)
                if b is not None and (b.shape, b.dtype, b.device) == (copy.shape, copy.dtype, copy.device):
                    b.copy_(copy)
                else:
                    m._buffers[name] = copy.clone()

    def copy(self) -> KeptBuffers:
        """Another keeper holding the values kept now (to replay this step after later ones)."""
        other = KeptBuffers.__new__(KeptBuffers)
        other._slots, other._kept = self._slots, list(self._kept)
        other._copies = [None if c is None else c.clone() for c in self._copies]
        return other
