"""Gradient figures of whole modules, rolled up from their parameters' (Qt-free, exact)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from gradexplorer.core.stats.records import ParamStats


@dataclass(frozen=True)
class ModuleGradients:
    """One module's gradient this step, over all parameters of it and its submodules.

    ``norm``: the L2 norm of all their finite gradient elements together (float64, exact as
    ``sqrt(Σ norm²)``); ``abs_max``: the largest |g|; ``update_ratio``: the largest of the
    parameters' update-to-weight ratios; ``nonfinite``: NaN plus ±Inf elements; ``with_grad``:
    how many of its ``params`` had a gradient. Figures are None when no parameter had one.
    """

    path: str
    params: int
    with_grad: int
    norm: float | None
    abs_max: float | None
    update_ratio: float | None
    nonfinite: int


def owners(param: str) -> list[str]:
    """Every module that holds ``param``: ``a.b.w`` → ``""`` (the model), ``a``, ``a.b``."""
    parts = param.split(".")[:-1]
    return [""] + [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def module_gradients(params: Mapping[str, ParamStats]) -> dict[str, ModuleGradients]:
    """Figures for every module that holds a parameter in ``params`` (``""``: the model)."""
    squares: dict[str, list[float]] = {}
    peaks: dict[str, list[float]] = {}
    ratios: dict[str, list[float]] = {}
    counts: dict[str, list[int]] = {}  # params, with_grad, nonfinite
    for name, s in params.items():
        for path in owners(name):
            count = counts.setdefault(path, [0, 0, 0])
            count[0] += 1
            count[2] += (s.nan_count or 0) + (s.inf_count or 0)
            if not s.has_grad or s.norm is None:
                continue
            count[1] += 1
            squares.setdefault(path, []).append(float(s.norm) ** 2)
            if s.abs_max is not None:
                peaks.setdefault(path, []).append(float(s.abs_max))
            if s.update_ratio is not None:
                ratios.setdefault(path, []).append(float(s.update_ratio))
    return {path: ModuleGradients(
        path, n, with_grad,
        math.sqrt(math.fsum(squares[path])) if path in squares else None,
        max(peaks[path]) if path in peaks else None,
        max(ratios[path]) if path in ratios else None,
        bad) for path, (n, with_grad, bad) in counts.items()}
