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
    """Figures for every module that holds a parameter in ``params`` (``""``: the model).

    The parameters are grouped by the module that holds them first, and each group's figures
    handed to that module's owners (a module of 2,500 blocks: 2,500 groups, not 5,000 params
    walked up one by one); ``fsum`` and ``max`` do not depend on the order."""
    held: dict[str, list[ParamStats]] = {}
    for name, s in params.items():
        held.setdefault(name.rpartition(".")[0], []).append(s)
    squares: dict[str, list[float]] = {}
    peaks: dict[str, list[float]] = {}
    ratios: dict[str, list[float]] = {}
    counts: dict[str, list[int]] = {}  # params, with_grad, nonfinite
    for module, members in held.items():
        graded = [s for s in members if s.has_grad and s.norm is not None]
        own = ([float(s.norm) ** 2 for s in graded],
               [float(s.abs_max) for s in graded if s.abs_max is not None],
               [float(s.update_ratio) for s in graded if s.update_ratio is not None])
        bad = sum((s.nan_count or 0) + (s.inf_count or 0) for s in members)
        for path in owners(f"{module}.p") if module else [""]:
            count = counts.setdefault(path, [0, 0, 0])
            count[0] += len(members)
            count[1] += len(graded)
            count[2] += bad
            for into, values in zip((squares, peaks, ratios), own, strict=True):
                if values:
                    into.setdefault(path, []).extend(values)
    return {path: ModuleGradients(
        path, n, with_grad,
        math.sqrt(math.fsum(squares[path])) if path in squares else None,
        max(peaks[path]) if path in peaks else None,
        max(ratios[path]) if path in ratios else None,
        bad) for path, (n, with_grad, bad) in counts.items()}
