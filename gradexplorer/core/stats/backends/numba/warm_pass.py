"""One real statistics pass of every kind a step makes, run to compile (or load from Numba's
cache) the statistics kernels off the training thread: ``backends.warmup``'s ``STATS`` runs
``compile_kernels`` in a helper process, then on a thread (``kernel_warmup.KernelWarmup``).
"""

from __future__ import annotations

import numpy as np

from gradexplorer.core.stats.backends.kernel_warmup import compiling
from gradexplorer.core.stats.backends.warmup import BINS


def compile_kernels() -> bool:
    """Every statistics kernel compiled (or loaded from Numba's cache) for the argument types
    real steps pass: float32 and float64 gradients read in place and packed (not contiguous),
    with histograms, NaN and Inf, the update ratio and SGD's and Adam's state. True."""
    import torch
    from torch import nn

    from gradexplorer.core.session.eager_optimizers import SGD, Adam  # the session's optimizers
    from gradexplorer.core.stats.monitor import monitor_pass
    from gradexplorer.core.stats.optimizer_state import optimizer_state

    class Unset(nn.Linear):
        """Parameters left as ``torch.empty`` made them: no random numbers drawn (this thread
        runs beside the user's seeded loop; ``skip_init``'s meta device would import sympy)."""

        def reset_parameters(self) -> None:
            pass

    with compiling():
        for dtype in (torch.float32, torch.float64):
            model = Unset(8, 4, dtype=dtype)
            for p in model.parameters():
                p.data = torch.linspace(-1.0, 1.0, p.numel(), dtype=dtype).reshape(p.shape)
            for optimizer in (SGD(model.parameters(), lr=0.1, momentum=0.9),
                              Adam(model.parameters(), lr=0.1)):
                for contiguous in (True, False):
                    monitor_pass(model, optimizer, BINS, "numba", contiguous)
                optimizer_state(optimizer, list(model.named_parameters()))
            copy_and_moments(model.weight.data)  # the statistics worker's first pass
    return True


def copy_and_moments(values) -> None:
    """The statistics worker's copy-and-moments kernel (``numba.worker``) run on ``values``."""
    from gradexplorer.core.stats.backends.numba import in_place as BA

    at = BA.addresses_of([values])
    BA.copy_and_moments_at(at, at.sizes * 0, np.empty(at.total, at.like.dtype))

