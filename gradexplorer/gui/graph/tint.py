"""Colouring graph nodes by the latest gradient norm of the parameters behind them (Qt-free)."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import compress
from typing import Any

import numpy as np

from gradexplorer.core.model.membership import module_parameters, owner_of
from gradexplorer.gui.graph.drawing import KIND_CODES, GraphDrawing

# From small to large gradient norm (log scale across the graph), then "no gradient".
HEAT_STOPS = np.array([[0xff, 0xf8, 0xe1], [0xff, 0xe0, 0xb2], [0xff, 0xb7, 0x4d],
                       [0xff, 0x8a, 0x65], [0xef, 0x53, 0x50]], dtype=float)  # text stays legible
NO_GRADIENT = 0xFFE0E0E0
NONFINITE = 0xFFB39DDB  # violet: outside the heat scale, so NaN/Inf cannot be read as "small"
MODULE = KIND_CODES.index("module")
PARAM = KIND_CODES.index("param")


def params_behind(drawing: GraphDrawing, names: list[str],
                  previous: list[list[str]] | None = None) -> list[list[str]]:
    """For each node, the parameters whose gradient norm colours it. ``previous``: the result
    for the drawing this one edits (``drawing.kept``), reused for the nodes it keeps."""
    by_owner: dict[str, list[str]] = {}
    for name in names:
        by_owner.setdefault(owner_of(name), []).append(name)
    out: list[list[str]] = []
    if previous is not None and drawing.kept is not None and len(previous) == len(drawing.kept):
        out = list(compress(previous, drawing.kept))
    for i in range(len(out), len(drawing)):
        module, param = drawing.modules[i], drawing.params[i]
        if param is not None:
            out.append([param])
        elif drawing.kinds[i] == MODULE:
            out.append(module_parameters(names, module))
        else:
            out.append(by_owner.get(module, []) if module else [])
    return out


def heat_colours(values: np.ndarray) -> np.ndarray:
    """ARGB colours for values in [0, 1]."""
    t = np.clip(values, 0, 1) * (len(HEAT_STOPS) - 1)
    lo = np.floor(t).astype(int).clip(0, len(HEAT_STOPS) - 2)
    frac = (t - lo)[:, None]
    rgb = HEAT_STOPS[lo] * (1 - frac) + HEAT_STOPS[lo + 1] * frac
    rgb = rgb.round().astype(np.uint32)
    return (0xFF000000 | (rgb[:, 0] << 16) | (rgb[:, 1] << 8) | rgb[:, 2]).astype(np.uint32)


def node_norms(behind: list[list[str]], stats: Mapping[str, Any]) -> np.ndarray:
    """Combined gradient norm per node; NaN where no parameter is behind it, -1 for no grad."""
    norms = np.full(len(behind), np.nan)
    for i, names in enumerate(behind):
        if not names:
            continue
        squares = [stats[n].norm ** 2 for n in names if n in stats and stats[n].has_grad
                   and stats[n].norm is not None and np.isfinite(stats[n].norm)]
        norms[i] = np.sqrt(sum(squares)) if squares else -1.0
    return norms


def node_nonfinite(behind: list[list[str]], stats: Mapping[str, Any]) -> np.ndarray:
    """Per node: whether any parameter behind it has a gradient holding NaN or ±Inf."""
    return np.array([any(n in stats and stats[n].nonfinite for n in names) for names in behind],
                    dtype=bool)


def magnitude_colours(values: np.ndarray) -> np.ndarray:
    """Heat (ARGB) by log magnitude across ``values``: the smallest positive value palest, the
    largest reddest, exact zero as the smallest; 0 (no colour) where a value is NaN or < 0."""
    values = np.asarray(values, dtype=float)
    out = np.zeros(len(values), dtype=np.uint32)
    live = np.isfinite(values) & (values > 0)
    if live.any():
        logs = np.log10(values[live])
        lo, hi = logs.min(), logs.max()
        out[live] = heat_colours((logs - lo) / (hi - lo) if hi > lo else np.full(len(logs), 0.6))
    out[np.isfinite(values) & (values == 0)] = heat_colours(np.zeros(1))[0]
    return out


def tinted_fills(base: np.ndarray, norms: np.ndarray, bad: np.ndarray | None = None) -> np.ndarray:
    """Base fills with gradient heat where a norm is known, grey where there is no gradient and
    violet where the gradient holds NaN/Inf (``bad``: those nodes are left out of the scale)."""
    fills = base.copy()
    if bad is not None and bad.any():
        norms = np.where(bad, np.nan, norms)
    fills[norms == -1.0] = NO_GRADIENT
    heat = magnitude_colours(norms)
    fills[heat != 0] = heat[heat != 0]
    if bad is not None:
        fills[bad] = NONFINITE
    return fills


def table_tints(stats: list[Any]) -> list[int]:
    """ARGB per table row (0: none) from its ParamStats or module roll-up (None: no figures):
    heat by ``norm``, violet where ``nonfinite`` (the norm then is only the finite part's)."""
    bad = np.array([bool(getattr(s, "nonfinite", False)) for s in stats], dtype=bool)
    norms = np.array([np.nan if getattr(s, "norm", None) is None else s.norm for s in stats],
                     dtype=float)
    norms[bad] = np.nan
    tints = magnitude_colours(norms)
    tints[bad] = NONFINITE
    return tints.tolist()
