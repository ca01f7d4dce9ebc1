"""The rolling band a spike leaves: median and MAD of each figure's last ``window`` values.

Every figure (the loss, the global gradient norm, each parameter's gradient norm and update
ratio) is a positive number whose natural size drifts over training and whose noise is
multiplicative, so the band lives on the log scale: ``t = ln(x)``; the centre is the median of
the last ``window`` values of ``t``, the width the robust standard deviation
``σ = 1.4826 · MAD`` (never below ``min_width``), and a value is ``z = (t - centre) / σ``
band widths above it. A step leaves the band when ``z > k``. Spikes are upward: a figure that
drops below its band (a loss that falls) is not an event; NaN and ±Inf always are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gradexplorer.core.messages.errors import UserError

MAD_TO_SIGMA = 1.4826  # σ of a normal distribution per unit of median absolute deviation


@dataclass(frozen=True)
class SpikeSettings:
    """How spikes are found; the defaults give no event on quiet runs (tests: 500 steps).

    - ``window``: recorded steps each band remembers (median/MAD over them)
    - ``k``: how many band widths (robust σ) above the centre a step must be to be an event
    - ``warmup``: values a band needs before it flags anything
    - ``min_width``: the least σ, in natural-log units (0.1 ≈ a 10% change per σ), so a
      figure that hardly moves does not flag tiny wiggles
    - ``onset_k``: a figure has "started to move" once it is this many widths above its band;
      the onset ranking walks back from the event over consecutive steps above it
    - ``lookback``: how many recorded steps before an event the onset may lie
    - ``merge``: flagged steps less than this many recorded steps apart are one event
    - ``refresh``: once the window is full, the bands' median and MAD are recomputed every this
      many recorded steps (before: every step); in between a step is scored against them
    """

    window: int = 64
    k: float = 8.0
    warmup: int = 32
    min_width: float = 0.1
    onset_k: float = 3.0
    lookback: int = 16
    merge: int = 8
    refresh: int = 4

    def __post_init__(self) -> None:
        for name in ("window", "warmup", "lookback", "merge", "refresh"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise UserError(f"spike settings: {name} must be a positive whole number, "
                                f"got {value!r}")
        for name in ("k", "min_width", "onset_k"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise UserError(f"spike settings: {name} must be a positive number, got {value!r}")
        if self.warmup > self.window:
            raise UserError(f"spike settings: warmup ({self.warmup}) cannot exceed window "
                            f"({self.window})")
        if self.onset_k > self.k:
            raise UserError(f"spike settings: onset_k ({self.onset_k}) cannot exceed k ({self.k})")


_KERNELS = None  # spike_kernels once loaded, False where Numba cannot load


def spike_kernels():
    """The Numba kernels of the detector's step (imported on first use: this module is
    imported with the public API, Numba only when spikes are detected); None where they cannot
    load (then numpy does the same operations). Importing does not compile them: their first
    call does (a detector waits for spike_warmup's thread to have made that call)."""
    global _KERNELS
    if _KERNELS is None:
        try:
            from gradexplorer.core.diagnose import spike_kernels as kernels
            _KERNELS = kernels
        except Exception:  # noqa: BLE001 - no Numba, or no kernel cache
            _KERNELS = False
    return _KERNELS or None


def log_scale(values: np.ndarray) -> np.ndarray:
    """``ln(x)`` for positive finite x; NaN for the rest (zero, negative, missing, non-finite)."""
    out = np.full(values.shape, np.nan)
    good = np.isfinite(values) & (values > 0)
    np.log(values, out=out, where=good)
    return out


def _median(rows: np.ndarray) -> np.ndarray:
    """The median of each row (a sort along the contiguous axis: faster than np.median's
    partition on these small arrays)."""
    s = np.sort(rows, axis=1)
    n = s.shape[1]
    return s[:, n // 2] if n % 2 else 0.5 * (s[:, n // 2 - 1] + s[:, n // 2])


class RollingBands:
    """One band per figure (a row of the history); ``score(t)`` before ``push(t)`` each step."""

    def __init__(self, settings: SpikeSettings, size: int) -> None:
        self.settings = settings
        self._buf = np.full((size, settings.window), np.nan)
        self._last = np.full(size, np.nan)  # a missing value repeats the last one seen
        self._count = np.zeros(size, np.int64)
        self._pos = 0
        self._filled = 0
        self._band: tuple[np.ndarray, np.ndarray] | None = None  # (centre, width), cached
        self._age = 0  # pushes since the cache was computed

    @property
    def size(self) -> int:
        return self._buf.shape[0]

    def grow(self, size: int) -> None:
        """Add bands for new figures (a parameter that appears later)."""
        extra = size - self.size
        if extra > 0:
            self._buf = np.concatenate([self._buf, np.full((extra, self._buf.shape[1]), np.nan)])
            self._last = np.concatenate([self._last, np.full(extra, np.nan)])
            self._count = np.concatenate([self._count, np.zeros(extra, np.int64)])
            self._band = None

    def score(self, t: np.ndarray, kernels=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(z, centre, width)`` of log-scale values ``t`` against the bands so far; z is NaN
        where a band is still warming up or the value is missing. With numpy's operations, or
        the Numba ``kernels`` given (``spike_kernels()``): the same figures."""
        if self._filled == 0:
            nan = np.full(t.shape, np.nan)
            return nan, nan, nan
        if self._band is None or self._age >= self.settings.refresh or \
                self._filled < self._buf.shape[1]:
            self._band, self._age = self._bands(kernels), 0
        centre, width = self._band
        if kernels is not None:
            z = np.empty(t.shape)
            kernels.scores(t, centre, width, self._count, self.settings.warmup, z)
            return z, centre, width
        with np.errstate(invalid="ignore"):
            z = (t - centre) / width
        z[self._count < self.settings.warmup] = np.nan
        return z, centre, width

    def _bands(self, kernels) -> tuple[np.ndarray, np.ndarray]:
        """(centre, width) of every band from the values remembered."""
        if kernels is not None:
            centre, width = np.empty((2, self.size))
            kernels.bands_of(self._buf, self._filled, MAD_TO_SIGMA, float(self.settings.min_width),
                             centre, width)
            return centre, width
        hist = self._buf[:, :self._filled]
        centre = _median(hist)
        return centre, np.maximum(MAD_TO_SIGMA * _median(np.abs(hist - centre[:, None])),
                                  self.settings.min_width)

    def observe(self, values: np.ndarray, nonfinite: np.ndarray, since: np.ndarray, step: int,
                kernels) -> tuple:
        """``score(log_scale(values))``, ``push`` and ``SpikeDetector``'s flags at once with the
        Numba ``kernels`` (numpy's log between two calls): ``(t, z, centre, bad, moved,
        flagged, any flagged)``, ``since`` updated in place."""
        clean = np.empty(values.size)
        kernels.log_inputs(values, clean)
        t = np.log(clean)
        recompute = self._filled > 0 and (self._band is None or self._age >= self.settings.refresh
                                          or self._filled < self._buf.shape[1])
        if recompute and (self._band is None or self._band[0].size != self.size):
            self._band = tuple(np.empty((2, self.size)))
        elif self._band is not None and not all(b.flags.c_contiguous for b in self._band):
            self._band = tuple(np.ascontiguousarray(b) for b in self._band)  # numpy's, until now
        centre, width = self._band if self._band is not None else (np.full(self.size, np.nan),) * 2
        z, out, had = np.empty(values.size), np.empty((3, values.size), bool), self._filled
        found = kernels.observe_step(
            values, nonfinite, t, self._buf, self._last, self._count, self._pos, self._filled,
            recompute, centre, width, MAD_TO_SIGMA, float(self.settings.min_width),
            self.settings.warmup, since, step, float(self.settings.onset_k), float(self.settings.k),
            z, out)
        if recompute:
            self._age = 0
        self._advance()
        if not had:  # no band before this step: the centre is NaN (as ``score``'s)
            centre = np.full(self.size, np.nan)
        return (t, z, centre, *out, found)

    def push(self, t: np.ndarray, kernels=None) -> None:
        """Remember this step's values (missing ones repeat the figure's last value); with numpy,
        or the Numba ``kernels`` given."""
        if kernels is not None:
            kernels.push(t, self._last, self._count, self._buf, self._pos)
        else:
            seen = np.isfinite(t)
            self._last = np.where(seen, t, self._last)
            self._count += seen
            self._buf[:, self._pos] = self._last
        self._advance()

    def _advance(self) -> None:
        self._pos = (self._pos + 1) % self._buf.shape[1]
        self._filled = min(self._filled + 1, self._buf.shape[1])
        self._age += 1
