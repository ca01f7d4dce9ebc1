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
