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
