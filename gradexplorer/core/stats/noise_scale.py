"""The gradient noise scale (McCandlish et al. 2018, appendix A.1) and the per-parameter gradient
SNR, from the squared gradient norms at two batch sizes that an accumulating loop already has.

A step of ``k`` micro-batches of ``b`` samples each: ``g_i`` the gradient of micro-batch ``i``'s
mean loss, ``G = (1/k) Σ g_i`` the step's. With ``B_small = b`` and ``B_big = k·b``,
``|G_small|²`` the mean of the ``k`` values ``|g_i|²`` and ``|G_big|² = |G|²``:

- ``|G|²_est = (B_big·|G_big|² − B_small·|G_small|²) / (B_big − B_small)`` (unbiased for the
  squared norm of the true gradient; can be negative when the noise hides it),
- ``tr(Σ)_est = (|G_small|² − |G_big|²) / (1/B_small − 1/B_big)`` (unbiased for the trace of the
  per-sample gradient covariance),
- ``B_simple = tr(Σ)_est / |G|²_est``,
- ``SNR = |G|²_est / (tr(Σ)_est / b) = b / B_simple``: the squared true gradient against the
  noise (total variance) of one micro-batch's gradient. ``tr(Σ)_est / b`` is the unbiased sample
  variance ``Σ_i |g_i − G|² / (k − 1)``, so the plug-in ratio ``|G|² / that`` is ``SNR + 1/k``.

Per parameter, per module (sums of its parameters' ``|G|²_est`` and ``tr(Σ)_est``: both are
sums over elements) and for the whole model. Smoothing (``NoiseSmoother``): exponential moving
averages of ``tr(Σ)_est`` and of ``|G|²_est`` *separately*, their ratio the smoothed
``B_simple`` (the paper's advice: a ratio of noisy estimates is biased and heavy-tailed; a ratio
of averages is not), with a ±1 standard-error band by the delta method (``spread``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from gradexplorer.core.stats.module_rollup import owners

BETA = 0.95  # the EMA's decay: about 20 steps' memory (effective sample size (1+β)/(1−β) = 39)


@dataclass(frozen=True)
class NoiseFigures:
    """The estimates from ``small`` = mean_i |g_i|² and ``big`` = |G|² at ``k`` parts of ``b``."""

    small: float
    big: float
    g_sq: float  # |G|²_est
    trace: float  # tr(Σ)_est
    b_simple: float | None  # tr(Σ)_est / |G|²_est (None where |G|²_est is 0)
    snr: float | None  # |G|²_est / (tr(Σ)_est / b) (None where tr(Σ)_est is 0)


def estimate(small: float, big: float, k: int, b: float) -> NoiseFigures:
    """The unbiased estimates of one parameter (or a sum of them) at ``k ≥ 2`` parts of ``b``."""
    if k < 2 or not b > 0:
        raise ValueError(f"the noise scale needs k ≥ 2 parts of b > 0 samples (k={k}, b={b})")
    b_small, b_big = float(b), float(k) * b
    g_sq = (b_big * big - b_small * small) / (b_big - b_small)
    trace = (small - big) / (1.0 / b_small - 1.0 / b_big)
    return NoiseFigures(small, big, g_sq, trace, trace / g_sq if g_sq != 0 else None,
                        g_sq * b_small / trace if trace != 0 else None)


def estimates(small: Mapping[str, float], big: Mapping[str, float], k: int,
              b: float) -> tuple[NoiseFigures, dict[str, NoiseFigures]]:
    """``(the whole model's, {parameter: its figures})`` from per-parameter mean |g_i|² and |G|²
    (the whole model's from their sums: squared norms add over parameters)."""
    per = {name: estimate(small[name], big[name], k, b) for name in small}
    whole = estimate(math.fsum(small.values()), math.fsum(big[n] for n in small), k, b)
    return whole, per


def module_figures(per: Mapping[str, NoiseFigures], k: int, b: float) -> dict[str, NoiseFigures]:
    """Every module holding a parameter of ``per`` (``""``: the model): the estimates from the
    sums of its parameters' ``small`` and ``big``."""
    sums: dict[str, list[list[float]]] = {}
    for name, f in per.items():
        for path in owners(name):
            pair = sums.setdefault(path, [[], []])
            pair[0].append(f.small)
            pair[1].append(f.big)
    return {path: estimate(math.fsum(s), math.fsum(g), k, b) for path, (s, g) in sums.items()}


@dataclass(frozen=True)
class Smoothed:
    """The EMAs of ``|G|²_est`` and ``tr(Σ)_est`` (bias-corrected), their ratio ``b_simple`` and
    its ±1 standard-error band ``(low, high)`` (None until two steps, or where |G|²_ema ≤ 0)."""

    g_sq: float
    trace: float
    b_simple: float | None
    low: float | None
    high: float | None


class NoiseSmoother:
    """EMA of numerator and denominator separately (``beta`` per recorded step), and of their
    squares and product for the spread: with ``T`` and ``G`` the EMAs of tr(Σ) and |G|², ``V``
    their EMA variances and ``C`` the covariance, the ratio's standard error is
    ``R·sqrt(V_T/T² + V_G/G² − 2C/(T·G)) / sqrt(n)``, ``n = (1+β)/(1−β)`` the EMA's effective
    number of steps (fewer at the start: ``1 / Σ w²`` of the normalised weights)."""

    def __init__(self, beta: float = BETA) -> None:
        if not 0 <= beta < 1:
            raise ValueError(f"the EMA's beta must be in [0, 1), got {beta}")
        self.beta = beta
        self.steps = 0
        self._m = [0.0] * 5  # EMAs of T, G, T², G², T·G (not bias-corrected)
        self._w2 = 0.0  # Σ w² of the raw weights, for the effective sample size

    def add(self, trace: float, g_sq: float) -> Smoothed:
        b = self.beta
        for i, x in enumerate((trace, g_sq, trace * trace, g_sq * g_sq, trace * g_sq)):
            self._m[i] = b * self._m[i] + (1 - b) * x
        self._w2 = b * b * self._w2 + (1 - b) ** 2
        self.steps += 1
        norm = 1 - b ** self.steps  # the bias correction: the weights sum to this
        t, g, tt, gg, tg = (m / norm for m in self._m)
        ratio = t / g if g > 0 else None
        if ratio is None or self.steps < 2 or t == 0:
            return Smoothed(g, t, ratio, None, None)
        n = norm * norm / self._w2  # effective number of steps averaged
        rel = (tt - t * t) / (t * t) + (gg - g * g) / (g * g) - 2 * (tg - t * g) / (t * g)
        se = abs(ratio) * math.sqrt(max(rel, 0.0) / n)
        return Smoothed(g, t, ratio, ratio - se, ratio + se)


def top_noisy(per: Mapping[str, NoiseFigures], count: int = 5) -> list[tuple[str, float]]:
    """The ``count`` parameters of lowest SNR (the noisiest gradients), lowest first."""
    known = [(name, f.snr) for name, f in per.items() if f.snr is not None]
    return sorted(known, key=lambda item: item[1])[:count]
