"""What each backward op computes: a short text with its formula in the node's actual shapes.

``explain_node(G, node)`` reads the node's name, the shape of the gradient it receives (its
forward output), the shapes of its inputs (the nodes it sends to, by slot) and of its saved
tensors, and fills the op's text from ``explain_texts.TEXTS``. Ops without a text of their own
get an honest generic one that says so. ``explain_graph(G)`` puts ``explanation`` on every node.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import networkx as nx

from gradexplorer.core.diagnose.explain_texts import SAVED_WHY, SAVED_WHY_BY_OP, TEXTS
from gradexplorer.core.graph.style import format_shape

_VERSION = re.compile(r"Backward\d*$")


class Shapes(Mapping):
    """Placeholders of a text: ``g`` (gradient received), ``x0``… (inputs by slot), ``saved_*``.

    An input that needs no gradient has no edge, and reads ``(no grad)``; a text never fails.
    """

    def __init__(self, values: dict[str, str]) -> None:
        self._values = values

    def __getitem__(self, key: str) -> str:
        return self._values.get(key, "(no grad)" if key.startswith("x") else "?")

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


def node_shapes(G: nx.DiGraph, node: Any) -> Shapes:
    """The shapes an op's text is written in, as ``4×8`` strings."""
    attrs = G.nodes[node]
    values = {"g": format_shape(attrs.get("shape")) or "?", "module": attrs.get("module") or "(root)",
              "param": attrs.get("param") or "a leaf tensor"}
    for _, dst, data in G.out_edges(node, data=True):
        shape = format_shape(G.nodes[dst].get("shape"))
        for slot in data.get("slots", (data.get("slot", 0),)):
            values[f"x{slot}"] = shape or "?"
    for key, shape in (attrs.get("saved") or {}).items():
        values[f"saved_{key}"] = format_shape(shape)
    return Shapes(values)


def base_name(name: str) -> str:
    """``MulBackward1`` → ``Mul``; ``AccumulateGrad`` stays."""
    return _VERSION.sub("", name)


def explain_node(G: nx.DiGraph, node: Any) -> str:
    """The explanation of one node: what its backward computes, in its shapes, and what it saved."""
    attrs = G.nodes[node]
    name = str(attrs.get("name", ""))
    if attrs.get("kind") == "module":
        module = attrs.get("module") or "(root)"
        return f"{attrs.get('members', 0)} backward nodes of module {module} folded into one"
    shapes = node_shapes(G, node)
    text = TEXTS.get(name) or TEXTS.get(base_name(name))
    if text is None:
        text = generic_text(name)
    lines = [text.format_map(shapes)]
    saved = attrs.get("saved") or {}
    if saved:
        why = {**SAVED_WHY, **SAVED_WHY_BY_OP.get(name, {})}
        lines.append("Saved for backward: " + "; ".join(
            f"{key} {format_shape(shape)}" + (f" ({why[key]})" if key in why else "")
            for key, shape in saved.items()))
    elif attrs.get("kind") == "op":
        lines.append("Saves no tensors: its backward needs only the incoming gradient and shapes.")
    return "\n".join(lines)


def generic_text(name: str) -> str:
    """The honest text for an op without its own: what every backward node does."""
    op = base_name(name) or name
    return (f"Backward of the forward op '{op}': computes grad_input = grad_output · ∂output/∂input "
            "(a vector–Jacobian product) for each input that needs a gradient, from the incoming "
            "gradient ({g}). gradexplorer has no op-specific text for it.")


def explain_graph(G: nx.DiGraph) -> nx.DiGraph:
    """Set ``explanation`` on every node of ``G`` (returns ``G``)."""
    for node in G.nodes:
        G.nodes[node]["explanation"] = explain_node(G, node)
    return G
