"""The spike detector's Numba kernels made ready off the training thread.

Numba compiles the kernels (spike_kernels.py) on their first call and keeps them in its cache
(``__pycache__`` beside the sources, or ``NUMBA_CACHE_DIR``). Where that cache is cold — a fresh
installation or clone, a changed source — compiling them took 5.4 s on the 2-core machine, and
a watched loop's first step with a run directory waited for it (loading them from a warm cache
takes a fraction of a second, also on that step).

Now a detector's first step starts the work on a thread (``ready()``, which never waits, gives
the kernels once they are ready, None until then) and does its steps with numpy's operations
meanwhile: the same figures bit for bit (tests/test_spike_kernels.py), so no step is skipped or
scored differently; the first steps cannot be flagged anyway while the bands warm up. A cold
cache is filled by a helper Python process (the parent's ``sys.path`` and environment: the same
cache; at a lower priority, so a busy machine gives the training its cores first): the
compilation holds neither this process's GIL nor Numba's compiler lock (compiled on the thread,
it slowed the watched steps threefold). The thread then loads the kernels from the cache, or
compiles them itself where no helper could (a frozen application).

``wait()`` lets a started warm-up end (a detector's ``close``: no thread left working after
it). A warm-up that fails is told once as a warning; spike detection goes on with numpy. In a
child forked while the warm-up ran, the thread does not exist: the child never waits for it
and its detectors keep to numpy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import warnings

import numpy as np

from gradexplorer.core.diagnose.spike_band import RollingBands, SpikeSettings, spike_kernels
from gradexplorer.core.errors import first_line

HELPER = ("import json, os, sys; sys.path[:] = json.loads(sys.argv[1]); os.nice(10); "  # yields a core
          "from gradexplorer.core.diagnose.spike_warmup import compile_kernels; compile_kernels()")
HELPER_TIMEOUT = 600  # seconds; a helper stuck beyond is killed and the thread compiles instead

_LOCK = threading.Lock()
_STATE: dict = {"thread": None, "kernels": None, "done": threading.Event()}


def _after_fork_in_child() -> None:
    """The parent's warm-up thread does not exist here: the warm-up is over, with the kernels
    it readied before the fork, else none (numpy)."""
    global _LOCK
    _LOCK = threading.Lock()
    finished, _STATE["done"] = _STATE["done"].is_set(), threading.Event()
    if _STATE["thread"] is not None:
        if not finished:
            _STATE["kernels"] = None
        _STATE["done"].set()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)


def ready():
    """The kernels once compiled (or loaded) for the detector's arguments, else None; the first
    call starts the warm-up. Never waits. None also where Numba cannot load, the warm-up failed
    or a caller turned the kernels off (``spike_band._KERNELS = False``): numpy does the step."""
    if _STATE["thread"] is None:
        _start()
    if not _STATE["done"].is_set() or _STATE["kernels"] is None:
        return None
    return spike_kernels()


def wait(timeout: float | None = None) -> bool:
    """Wait (at most ``timeout`` seconds) for a started warm-up's thread to end; True when no
    warm-up is at work."""
    thread = _STATE["thread"]
    if thread is not None and thread.ident is not None:
        thread.join(timeout)
        return not thread.is_alive()
    return True


def _start() -> None:
    with _LOCK:
        if _STATE["thread"] is None:
            thread = threading.Thread(target=_warm_up, name="gradexplorer-spike-kernels",
                                      daemon=True)
            _STATE["thread"] = thread
            try:
                thread.start()
            except RuntimeError:  # no thread to be had: numpy does every step
                _STATE["done"].set()


def _warm_up() -> None:
    """Ready the kernels: compiled into Numba's cache by a helper process where it lacks them,
    then loaded here (compiled here where the helper could not)."""
    kernels = None
    try:
        loaded = spike_kernels()
        if loaded is not None:
            if not _cached(loaded):
                _compile_in_helper()
            kernels = compile_kernels(loaded)
    except Exception as exc:  # noqa: BLE001 - spike detection goes on with numpy
        warnings.warn(f"gradexplorer: the spike kernels could not be compiled ({first_line(exc)}); "
                      f"spike detection goes on with numpy", RuntimeWarning, stacklevel=1)
    finally:
        _STATE["kernels"] = kernels
        _STATE["done"].set()


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


def _cached(kernels) -> bool:
    """Whether Numba's cache holds an index for each kernel a step calls (else it is cold)."""
    try:
        return all(os.path.exists(k._cache._cache_file._index_path)
                   for k in (kernels.observe_step, kernels.log_inputs))
    except AttributeError:  # another Numba's insides: take it as cold
        return False


def _compile_in_helper() -> None:
    """Compile the kernels into Numba's cache in a helper Python process; not where this
    process is a frozen application (its executable is no Python). A helper that fails leaves
    the work to the warm-up thread."""
    if getattr(sys, "frozen", False) or not sys.executable:
        return
    try:
        subprocess.run([sys.executable, "-c", HELPER, json.dumps([p for p in sys.path
                                                                    if isinstance(p, str)])],
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=HELPER_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError):
        pass  # compiled on the warm-up thread instead
