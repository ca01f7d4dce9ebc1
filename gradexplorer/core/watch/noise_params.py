"""Each parameter's noise figures of the recorded steps (``noise_watch.py``), made when first read,
in step order.

A step's per-parameter arrays (``PARAM_COLUMNS``: small, big, g_sq, trace, snr, snr_ema) are
read by the run's writer thread (its ``noise_params`` rows), the app and the user — or by no one
(a loop watched without a run directory). The step keeps only what they are made from (its
``small`` and ``big`` arrays, ``k``, ``b``); the first read of any step's arrays makes them for
every step waiting up to it, in order (the smoothed SNR is an EMA over steps), most of the work
as whole-array operations over those steps at once. ``MAX_WAITING`` steps waiting are made at
the step, so nothing grows without bound. The same operations in the same order as one step at a
time: the same figures, bit for bit.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator, Mapping

import numpy as np

PARAM_COLUMNS = ("small", "big", "g_sq", "trace", "snr", "snr_ema")
MAX_WAITING = 64  # steps whose arrays wait to be read; at this many, made at the step


class ParamFigures(Mapping):
    """One step's per-parameter arrays by column name (made on first read, see the module)."""

    def __init__(self, fold: ParamFold, small: np.ndarray, big: np.ndarray, k: int, b: int,
                 present) -> None:
        self._fold, self._made = fold, None
        self._args: tuple | None = (small, big, k, b, present)

    def _arrays(self) -> dict[str, np.ndarray]:
        if self._made is None:
            self._fold.make(self)
        return self._made

    def __getitem__(self, column: str) -> np.ndarray:
        return self._arrays()[column]

    def __iter__(self) -> Iterator[str]:
        return iter(PARAM_COLUMNS)

    def __len__(self) -> int:
        return len(PARAM_COLUMNS)


class ParamFold:
    """The per-parameter EMAs of ``|G|²_est`` and ``tr(Σ)_est`` (decay ``beta``) over ``count``
    parameters, and the steps waiting to be made."""

    def __init__(self, beta: float, count: int) -> None:
        self.beta = beta
        self._ema = np.zeros((2, count))  # per parameter: EMAs of g_sq and trace
        self._waiting: deque[ParamFigures] = deque()
        self._lock = threading.Lock()  # the writer thread and the training thread may both read

    def add(self, small: np.ndarray, big: np.ndarray, k: int, b: int, present) -> ParamFigures:
        """A step's arrays (``present``: the parameters it has, a slice or indices), to be made."""
        figures = ParamFigures(self, small, big, k, b, present)
        self._waiting.append(figures)
        if len(self._waiting) >= MAX_WAITING:
            self.make(figures)
        return figures

    def make(self, figures: ParamFigures) -> None:
        """Every step waiting up to ``figures``, made in order."""
        with self._lock:
            while figures._made is None:
                first = self._waiting.popleft()
                if not isinstance(first._args[4], slice):  # a parameter missing: on its own
                    self._one(first)
                    continue
                run = [first]  # steps of every parameter: together
                while run[-1] is not figures and self._waiting and \
                        isinstance(self._waiting[0]._args[4], slice):
                    run.append(self._waiting.popleft())
                if len(run) > 1:
                    self._whole(run)
                else:
                    self._one(first)

    def _one(self, figures: ParamFigures) -> None:
        """A step's arrays (NaN where a denominator is 0: divided by NaN instead, which warns of
        nothing)."""
        small, big, k, b, present = figures._args
        g_sq = (k * big - small) / (k - 1)
        trace = (small - big) * (b * k / (k - 1))
        snr = g_sq * b / np.where(trace != 0, trace, np.nan)
        beta = self.beta
        ema = self._ema[:, present] * beta
        ema[0] += (1 - beta) * g_sq
        ema[1] += (1 - beta) * trace
        self._ema[:, present] = ema
        snr_ema = ema[0] * b / np.where(ema[1] != 0, ema[1], np.nan)  # the bias cancels
        figures._made = dict(zip(PARAM_COLUMNS, (small, big, g_sq, trace, snr, snr_ema),
                                 strict=True))
        figures._args = None

    def _whole(self, run: list[ParamFigures]) -> None:
        """Steps of every parameter at once: ``_one``'s operations as (steps, parameters)
        arrays, the EMA's recurrence a step at a time."""
        small = np.stack([f._args[0] for f in run])
        big = np.stack([f._args[1] for f in run])
        k = np.array([[float(f._args[2])] for f in run])
        b = np.array([[float(f._args[3])] for f in run])
        g_sq = (k * big - small) / (k - 1)
        trace = (small - big) * (b * k / (k - 1))
        snr = g_sq * b / np.where(trace != 0, trace, np.nan)
        beta, both = self.beta, np.stack([g_sq, trace], 1)  # (steps, 2, parameters)
        emas, ema = np.empty_like(both), self._ema
        for i in range(len(run)):
            ema = ema * beta
            ema += (1 - beta) * both[i]
            emas[i] = ema
        self._ema = ema
        snr_ema = emas[:, 0] * b / np.where(emas[:, 1] != 0, emas[:, 1], np.nan)
        for i, figures in enumerate(run):
            figures._made = dict(zip(PARAM_COLUMNS, (small[i], big[i], g_sq[i], trace[i], snr[i],
                                                     snr_ema[i]), strict=True))
            figures._args = None
