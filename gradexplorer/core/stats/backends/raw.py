"""The raw per-step numbers a statistics backend hands back, before they become ParamStats.

Moments are kept in a form that stays exact at every magnitude: each gradient has a power-of-two
``SCALE`` s (every finite |x| < s) and a ``SHIFT`` K (the midrange (min + max) / 2). With
``a = x / s`` (exact) and ``d = a - K / s``, a backend sums ``NSQ = Σa²``, ``DSUM = Σd`` and
``DSQ = Σd²`` in float64 over the finite elements, so

    norm = s·√NSQ      mean = K + s·DSUM/n      std = s·√(DSQ/n − (DSUM/n)²)   (ddof = 0)

never overflow (float64 gradients of 1e300 are fine), a constant gradient has std exactly 0, and
|mean| ≫ std loses nothing (the shift is within √n·std of the mean, Samuelson's bound).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

# Columns of ``RawStats.moments``, one row per gradient.
MIN, MAX, ZEROS, NANS, INFS, FINITE, DSUM, DSQ, NSQ, SCALE, SHIFT = range(11)
MOMENT_COLUMNS = 11
SCALE_EXPONENTS = (-1000, 1000)  # 2**e stays a normal float64 and so does its inverse


@dataclass
class RawStats:
    """Arrays with one row per gradient, in the order the gradients were given.

    ``moments`` columns are named above; ``extra`` columns are below-range, above-range, NaN
    and Inf counts; ``update`` columns are ‖Δθ‖ and ‖θ_before‖ (float64, measured);
    ``pending``: ``counts`` and ``extra`` still being computed on the worker thread
    (``numba.worker.PendingWork``) — read them through ``histogram_arrays``.
    """

    moments: np.ndarray
    edges: np.ndarray | None = None
    counts: np.ndarray | None = None
    extra: np.ndarray | None = None
    update: np.ndarray | None = None
    pending: Any = None
    state_norms: np.ndarray | None = None  # ‖state‖ of each parameter read with ``update``

    def histogram_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """``(edges, counts, extra)``, waiting for counts still under way (any thread may ask);
        None without histograms. Counts that failed on the worker raise here (to the readers
        asking then); after that the step has none."""
        pending = self.pending
        if pending is not None:
            try:
                self.counts, self.extra = pending.result()
            except Exception:
                self.edges = None
                raise
            finally:
                self.pending = None
        return None if self.counts is None else (self.edges, self.counts, self.extra)

    def __getstate__(self) -> dict:
        """Pickled and copied with its counts, never with work under way."""
        if self.pending is not None:
            try:
                self.histogram_arrays()
            except Exception:  # noqa: BLE001 - the step is copied without histograms
                pass
        return dict(self.__dict__)

