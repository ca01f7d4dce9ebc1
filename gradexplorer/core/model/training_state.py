"""Run something on a model without leaving a trace: buffers and random state restored."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn


class SavedState:
    """The buffers (BatchNorm running stats, counters) and RNG streams of a moment, restorable.

    A forward pass in training mode updates BatchNorm statistics and draws dropout masks;
    ``restore()`` puts the model and the random streams (CPU and CUDA) back as they were, so
    the next training step is the one it would have been.
    """

    def __init__(self, model: nn.Module, device: torch.device | None = None) -> None:
        self._buffers = [(b, b.detach().clone()) for b in model.buffers()]
        self._cpu_rng = torch.random.get_rng_state()
        cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
        cuda = cuda or (device is not None and device.type == "cuda" and torch.cuda.is_available())
        self._cuda_rng = torch.cuda.get_rng_state_all() if cuda else None

    def restore(self) -> None:
        with torch.no_grad():
            for buffer, saved in self._buffers:
                buffer.copy_(saved)
        torch.random.set_rng_state(self._cpu_rng)
        if self._cuda_rng is not None:
            torch.cuda.set_rng_state_all(self._cuda_rng)


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
    model without buffers), and ``restore()`` puts them back, so a replay starts from the
    step's own state. A buffer the model has replaced since (``self.b = new``) is left as it is.
    """

    def __init__(self, model: nn.Module) -> None:
        self._slots = [(m, name) for m in model.modules() for name, b in m._buffers.items()
                       if b is not None]
        self._buffers = [m._buffers[name] for m, name in self._slots]
        with torch.no_grad():
            self._copies = [b.detach().clone() for b in self._buffers]

    def keep(self) -> None:
        if self._buffers:
            with torch.no_grad():
                torch._foreach_copy_(self._copies, self._buffers)

    def restore(self) -> list[str]:
        """Put the kept values back into the model's buffers; the names of those replaced since
        (not restored)."""
        stale = []
        with torch.no_grad():
            for (m, name), kept, copy in zip(self._slots, self._buffers, self._copies, strict=True):
                if m._buffers.get(name) is kept:
                    kept.copy_(copy)
                else:
                    stale.append(name)
        return stale

    def copy(self) -> KeptBuffers:
        """Another keeper holding the values kept now (to replay this step after later ones)."""
        other = KeptBuffers.__new__(KeptBuffers)
        other._slots, other._buffers = self._slots, self._buffers
        other._copies = [c.clone() for c in self._copies]
        return other
