"""A laid-out graph as SVG text, drawn by gradexplorer itself (no Graphviz)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from xml.sax.saxutils import escape, quoteattr

import networkx as nx

from gradexplorer.core.graph.geometry import Point, canvas_size, edge_polylines, node_boxes
from gradexplorer.core.graph.style import FONT_SIZE, KIND_FILL, KIND_STROKE, node_tooltip

_HEAD = """<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0f}" height="{h:.0f}" \
viewBox="0 0 {w:.1f} {h:.1f}" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" \
font-size="{fs}">
<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" \
markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>
<rect width="100%" height="100%" fill="white"/>
"""


def svg_text(G: nx.DiGraph, pos: Mapping[Hashable, Point],
             edge_points: Mapping[tuple, list[Point]] | None = None) -> str:
    """The whole drawing: edges with arrowheads under boxes coloured by kind, with tooltips."""
    boxes = node_boxes(G, pos)
    width, height = canvas_size(boxes)
    out = [_HEAD.format(w=width, h=height, fs=FONT_SIZE), '<g fill="none" stroke="#777" stroke-width="1">\n']
    for _, points in edge_polylines(G, boxes, pos, edge_points):
        coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        out.append(f'<polyline points="{coords}" marker-end="url(#arrow)"/>\n')
    out.append("</g>\n")
    for node, box in boxes.items():
        fill, stroke = KIND_FILL.get(box.kind, "#eee"), KIND_STROKE.get(box.kind, "#888")
        tip = escape(node_tooltip(G.nodes[node]))
        out.append(
            f'<g id={quoteattr(f"n{node}")}><title>{tip}</title>'
            f'<rect x="{box.left:.1f}" y="{box.top:.1f}" width="{box.width:.1f}" '
            f'height="{box.height:.1f}" rx="5" fill="{fill}" stroke="{stroke}"/>'
            f'<text x="{box.cx:.1f}" y="{box.cy + FONT_SIZE * 0.35:.1f}" text-anchor="middle">'
            f"{escape(box.label)}</text></g>\n"
        )
    out.append("</svg>\n")
    return "".join(out)
