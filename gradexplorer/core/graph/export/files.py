"""Write a laid-out graph to .json, .graphml, .dot or .svg (chosen by the extension).

PNG needs a renderer with fonts: the app's (``gradexplorer graph --out x.png``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any

import networkx as nx

from gradexplorer.core.files.atomic_file import check_writable_file, write_atomic
from gradexplorer.core.graph.export import EXPORT_FORMATS
from gradexplorer.core.graph.export.graphml import graphml_text
from gradexplorer.core.graph.export.svg import svg_text
from gradexplorer.core.graph.geometry import Point
from gradexplorer.core.graph.style import KIND_FILL, node_label
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.snapshot.format import encode_number


def export_graph(G: nx.DiGraph, pos: Mapping[Hashable, Point], path: str | os.PathLike,
                 *, edge_points: Mapping[tuple, list[Point]] | None = None) -> Path:
    """Write ``G`` with positions ``pos`` to ``path``; the suffix picks the format."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".png":
        raise UserError(f"{path.name}: PNG is drawn by the app's renderer: use "
                        "`gradexplorer graph --out FILE.png`, or write .svg")
    if suffix not in EXPORT_FORMATS:
        raise UserError(f"cannot tell the format of {path.name!r}: use one of {', '.join(EXPORT_FORMATS)}")
    if suffix == ".json":
        data = json.dumps(node_link_json(G, pos), default=_jsonable).encode()
    elif suffix == ".graphml":
        data = graphml_text(G, pos).encode()
    elif suffix == ".dot":
        data = dot_text(G, pos).encode()
    else:
        data = svg_text(G, pos, edge_points).encode()
    write_atomic(check_writable_file(path), data)
    return path


def _jsonable(value: Any) -> Any:
    if isinstance(value, (tuple, set, frozenset)):
        return list(value)
    if hasattr(value, "to_json"):  # the gradients a trace kept (``KeptGradients``): their list
        return value.to_json()
    return str(value)


def node_link_json(G: nx.DiGraph, pos: Mapping[Hashable, Point]) -> dict:
    """networkx node-link data (``nodes``, ``edges``) with ``x``, ``y`` on every placed node.

    Read it back with ``networkx.node_link_graph(data, edges="edges")``.
    """
    nodes = []
    for node, attrs in G.nodes(data=True):
        item = {**_finite_json(attrs), "id": node}
        if node in pos:
            item["x"], item["y"] = float(pos[node][0]), float(pos[node][1])
        nodes.append(item)
    edges = [{**_finite_json(attrs), "source": u, "target": v} for u, v, attrs in G.edges(data=True)]
    return {"directed": True, "multigraph": False, "graph": dict(G.graph), "nodes": nodes,
            "edges": edges}


def _finite_json(attrs: Mapping[str, Any]) -> dict:
    """Attributes with non-finite floats as the strings ``nan``, ``inf``, ``-inf`` (valid JSON)."""
    return {k: encode_number(v) for k, v in attrs.items()}


def _dot_quote(text: Any) -> str:
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def dot_text(G: nx.DiGraph, pos: Mapping[Hashable, Point]) -> str:
    """Graphviz DOT with labels, colours and our ``pos`` (``neato -n`` draws it as laid out)."""
    lines = ["digraph backward {",
             '  node [shape=box, style="rounded,filled", fontname="monospace", fontsize=10, '
             'height=0.3, margin="0.06,0.02"];']
    for node, attrs in G.nodes(data=True):
        fields = {"label": node_label(attrs), "fillcolor": KIND_FILL.get(attrs.get("kind"), "#eeeeee"),
                  "kind": attrs.get("kind", ""), "module": attrs.get("module") or ""}
        if attrs.get("param"):
            fields["param"] = attrs["param"]
        if node in pos:
            x, y = pos[node]
            fields["pos"] = f"{x:.1f},{-y:.1f}"  # one pixel per point, y up
        body = ", ".join(f"{k}={_dot_quote(v)}" for k, v in fields.items())
        lines.append(f"  {_dot_quote(node)} [{body}];")
    for u, v, attrs in G.edges(data=True):
        lines.append(f"  {_dot_quote(u)} -> {_dot_quote(v)} [slot={attrs.get('slot', 0)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
