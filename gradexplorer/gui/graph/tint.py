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


def tinted_fills(base: np.ndarray, norms: np.ndarray) -> np.ndarray:
    """Base fills with gradient heat where a norm is known and grey where there is no gradient."""
    fills = base.copy()
    fills[norms == -1.0] = NO_GRADIENT
    heat = magnitude_colours(norms)
    fills[heat != 0] = heat[heat != 0]
    return fills
