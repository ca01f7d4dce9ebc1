"""One real statistics pass of every kind a step makes, run to compile (or load from Numba's
cache) the statistics kernels off the training thread: ``backends.warmup``'s ``STATS`` runs
``compile_kernels`` in a helper process, then on a thread (``kernel_warmup.KernelWarmup``).
"""

from __future__ import annotations

from gradexplorer.core.stats.backends.kernel_warmup import compiling
from gradexplorer.core.stats.backends.warmup import BINS


def compile_kernels() -> bool:
    """Every statistics kernel compiled (or loaded from Numba's cache) for the argument types
    real steps pass: float32 and float64 gradients read in place and packed (not contiguous),
    with histograms, NaN and Inf, the update ratio and SGD's and Adam's state. True."""
    import torch
    from torch import nn
    from torch.nn.utils import skip_init

    from gradexplorer.core.stats.monitor import monitor_pass
    from gradexplorer.core.stats.optimizer_state import optimizer_state

    with compiling():
        for dtype in (torch.float32, torch.float64):
            model = skip_init(nn.Linear, 8, 4, dtype=dtype)  # torch's random numbers untouched:
            for p in model.parameters():  # this thread runs beside the user's seeded loop
                p.data = torch.linspace(-1.0, 1.0, p.numel(), dtype=dtype).reshape(p.shape)
            for optimizer in (torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                              torch.optim.Adam(model.parameters(), lr=0.1)):
                for contiguous in (True, False):
                    monitor_pass(model, optimizer, BINS, "numba", contiguous)
                optimizer_state(optimizer, list(model.named_parameters()))
    return True
