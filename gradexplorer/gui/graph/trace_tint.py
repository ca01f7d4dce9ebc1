"""Colouring a traced graph by the gradient each op sent on (Qt-free).

A graph from ``trace_gradients`` carries ``grad_norm`` on every node that ran; the tint then
shows the gradient flowing through every op, not only at the parameters. Non-finite nodes
are drawn in one alarm colour and the node where NaN/Inf was born is found for centring.
"""

from __future__ import annotations

import math

import numpy as np

from gradexplorer.gui.graph.drawing import GraphDrawing
from gradexplorer.gui.graph.tint import NONFINITE, tinted_fills

__all__ = ["NONFINITE", "is_traced", "origin_index", "traced_caption", "traced_fills", "traced_norms"]


def is_traced(drawing: GraphDrawing) -> bool:
    """Whether the drawn graph carries per-node gradient figures."""
    return bool(drawing.graph.graph.get("grad_traced"))


def traced_caption(drawing: GraphDrawing, short: bool = False) -> str:
    """`` · gradients of step N (Trace gradients)`` for a traced drawing (the colours and the
    figures on its nodes are that step's, however many steps the session takes after it), else
    ""; ``short``: `` · traced at step N`` (the graph toolbar's label, whole at 1024×700);
    ``micro-batch j of k`` follows for a step of several (the micro-batch box beside says it
    in the toolbar: the short caption does not repeat it)."""
    attrs = drawing.graph.graph
    step = attrs.get("step") if is_traced(drawing) else None
    if step is None:
        return ""
    if short:
        return f" · traced at step {step + 1}"
    k = attrs.get("micro_batches")
    part = (f", micro-batch {attrs['micro_batch'] + 1} of {k} (its ops; parameters: the step's "
            "accumulated gradient)") if k else ""
    return f" · gradients of step {step + 1}{part} (Trace gradients)"


def traced_norms(drawing: GraphDrawing) -> tuple[np.ndarray, np.ndarray]:
    """Per drawn node: its gradient norm (NaN: not traced, e.g. a collapsed module) and
    whether that gradient held NaN/Inf."""
    nodes = drawing.graph.nodes
    norms = np.full(len(drawing), np.nan)
    bad = np.zeros(len(drawing), dtype=bool)
    for i, node in enumerate(drawing.ids):
        attrs = nodes[node]
        norm = attrs.get("grad_norm")
        if norm is None:
            continue
        if isinstance(norm, float) and math.isfinite(norm) and attrs.get("grad_finite", True):
            norms[i] = norm
        else:
            bad[i] = True
    return norms, bad


def traced_fills(base: np.ndarray, drawing: GraphDrawing) -> np.ndarray:
    """Base fills tinted by each op's gradient norm; NaN/Inf nodes in the alarm colour."""
    norms, bad = traced_norms(drawing)
    fills = tinted_fills(base, norms)
    fills[bad] = NONFINITE
    return fills


def origin_index(drawing: GraphDrawing) -> int | None:
    """The drawn index of the node where NaN/Inf was born, if the graph has one."""
    node = drawing.graph.graph.get("nonfinite_origin")
    return drawing.index.get(node) if node is not None else None
