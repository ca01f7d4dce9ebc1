"""The spike detector's Numba kernels made ready off the training thread.

Numba compiles the kernels (spike_kernels.py) on their first call and keeps them in its cache
(``__pycache__`` beside the sources, or ``NUMBA_CACHE_DIR``). Where that cache is cold — a fresh
installation or clone, a changed source — compiling them took 5.4 s on the 2-core machine, and
a watched loop's first step with a run directory waited for it (loading them from a warm cache
takes a fraction of a second, also on that step).

Now a detector's first step starts the work on a thread
(``core/stats/backends/kernel_warmup.py``; ``ready()``,
which never waits, gives the kernels once they are ready, None until then) and does its steps
with numpy's operations meanwhile: the same figures bit for bit (tests/test_spike_kernels.py),
so no step is skipped or scored differently; the first steps cannot be flagged anyway while the
bands warm up. A cold cache is filled by a helper Python process (the parent's ``sys.path`` and
environment: the same cache; at a lower priority, so a busy machine gives the training its cores
first): the compilation holds neither this process's GIL nor Numba's compiler lock (compiled on
the thread, it slowed the watched steps threefold). The thread then loads the kernels from the
cache, or compiles them itself where no helper could (a frozen application).

``wait()`` lets a started warm-up end (a detector's ``close``: no thread left working after
it). A warm-up that fails is told once as a warning; spike detection goes on with numpy. In a
child forked while the warm-up ran, the thread does not exist: the child never waits for it
and its detectors keep to numpy.
"""

from __future__ import annotations

import numpy as np

from gradexplorer.core.diagnose.spike_band import RollingBands, SpikeSettings, spike_kernels
from gradexplorer.core.stats.backends.kernel_warmup import KernelWarmup, index_files_exist


def _cached() -> bool:
    """Whether Numba's cache holds an index for each kernel a step calls (else it is cold)."""
    kernels = spike_kernels()
    return kernels is not None and index_files_exist((kernels.observe_step, kernels.log_inputs))


WARMUP = KernelWarmup(__name__, "spike", _cached, "gradexplorer-spike-kernels",
                      "spike detection goes on with numpy")
wait = WARMUP.wait


def ready():
    """The kernels once compiled (or loaded) for the detector's arguments, else None; the first
    call starts the warm-up. Never waits. None also where Numba cannot load, the warm-up failed
    or a caller turned the kernels off (``spike_band._KERNELS = False``): numpy does the step."""
    return spike_kernels() if WARMUP.ready() else None


def compile_kernels(kernels=None):
    """Run the detector's kernel step on made-up figures, so each kernel is compiled (or loaded
    from the cache) for the very argument types a real step passes; the kernels, or None where
    Numba cannot load."""
    kernels = kernels or spike_kernels()
    if kernels is not None:
        bands = RollingBands(SpikeSettings(window=2, warmup=1, onset_k=1.0, k=1.0), 3)
        values, nonfinite = np.array([1.0, 2.0, np.nan]), np.zeros(3)
        for step in (1, 2):  # no band yet, then one to score against
            bands.observe(values, nonfinite, np.full(3, -1), step, kernels)
    return kernels
