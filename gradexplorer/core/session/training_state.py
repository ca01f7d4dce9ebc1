"""Run something on a model without leaving a trace: buffers and random state restored."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn


@contextmanager
def preserved_state(model: nn.Module, device: torch.device | None = None) -> Iterator[None]:
    """Restore every buffer (BatchNorm running stats, counters) and the RNG state on exit.

    A forward pass in training mode updates BatchNorm statistics and draws dropout masks;
    inside this block it still does, but afterwards the model and the random streams are as
    they were, so the next training step is the one it would have been.
    """
    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    cpu_rng = torch.random.get_rng_state()
    cuda = device is not None and device.type == "cuda" and torch.cuda.is_available()
    cuda_rng = torch.cuda.get_rng_state_all() if cuda else None
    try:
        yield
    finally:
        with torch.no_grad():
            for buffer, saved in buffers:
                buffer.copy_(saved)
        torch.random.set_rng_state(cpu_rng)
        if cuda_rng is not None:
            torch.cuda.set_rng_state_all(cuda_rng)
