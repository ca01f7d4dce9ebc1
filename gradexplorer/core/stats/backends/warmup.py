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

from gradexplorer.core.stats.backends.kernel_warmup import KernelWarmup, index_files_exist

BINS = 64


def _cached() -> bool:
    from gradexplorer.core.stats.backends.numba import kernels as K
    from gradexplorer.core.stats.backends.numba import kernels_in_place as KA
    from gradexplorer.core.stats.backends.numba import kernels_rows as KR
    from gradexplorer.core.stats.backends.numba import update_state as US

    return index_files_exist((KA.moments_at, KA.histograms_at, KA.edges_of, KA.norms_at,
                              KA.copy_at, KA.copy_moments_at, KA.update_norms_at, KA.second_moments_at,
                              KR.stat_columns, K.segment_moments, K.segment_histograms,
                              US.update_state_norms_at))


# the helper process and the warm-up thread run ``numba.warm_pass.compile_kernels`` (apart: it
# runs a real monitor pass, and the monitor asks this module whether the kernels are ready)
STATS = KernelWarmup("gradexplorer.core.stats.backends.numba.warm_pass", "statistics", _cached,
                     "gradexplorer-stats-kernels", "the torch backend and numpy measure instead")
ready, wait = STATS.ready, STATS.wait
