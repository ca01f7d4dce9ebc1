"""The statistics kernels made ready off the training thread (``core/stats/backends/kernel_warmup.py``).

Until ``ready()`` is True, every caller of the Numba statistics kernels takes its exact
fallback: ``make_backend("auto")`` the torch backend (``backends.registry``; a GradientMonitor
moves to the Numba backend at the first step after ``ready()``), the accumulated norms and the
optimizer's figures torch's float64 ops, a step's figures numpy's column by column
(``records``). The figures equal an independent float64 computation either way and each other
to the tolerance tests/test_stats_exactness.py holds the two backends to (histograms: the same
counts and edges); ``tests/test_stats_warmup.py`` checks the first steps of a fresh
environment compile nothing on the training thread.
"""

from __future__ import annotations

from gradexplorer.core.stats.backends.kernel_warmup import KernelWarmup, compiling, index_files_exist

BINS = 64


def _cached() -> bool:
    from gradexplorer.core.stats.backends.numba import kernels as K
    from gradexplorer.core.stats.backends.numba import kernels_in_place as KA
    from gradexplorer.core.stats.backends.numba import kernels_rows as KR

    return index_files_exist((KA.moments_at, KA.histograms_at, KA.edges_of, KA.norms_at,
                              KA.copy_at, KA.update_norms_at, KA.second_moments_at,
                              KR.stat_columns, K.segment_moments, K.segment_histograms))


STATS = KernelWarmup(__name__, "statistics", _cached, "gradexplorer-stats-kernels",
                     "the torch backend and numpy measure instead")
ready, wait = STATS.ready, STATS.wait


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
