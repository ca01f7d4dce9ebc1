"""A laid-out graph as SVG text, drawn by gradexplorer itself (no Graphviz), in the app's look
(``core.graph.style``: palette, two-line labels)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from xml.sax.saxutils import escape, quoteattr

import networkx as nx

from gradexplorer.core.graph.geometry import Point, canvas_size, edge_polylines, node_boxes
from gradexplorer.core.graph.style import (
    BORDER_COLOUR,
    EDGE_COLOUR,
    FONT_FAMILY,
    FONT_SIZE,
    KIND_FILL,
    TEXT_COLOUR,
    elide_middle,
    node_lines,
    node_tooltip,
)

_HEAD = """<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0f}" height="{h:.0f}" \
viewBox="0 0 {w:.1f} {h:.1f}" font-family="{family}" \
font-size="{fs}" fill="{text}">
<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" \
markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{edge}"/></marker></defs>
<rect width="100%" height="100%" fill="white"/>
"""


def svg_text(G: nx.DiGraph, pos: Mapping[Hashable, Point],
             edge_points: Mapping[tuple, list[Point]] | None = None) -> str:
    """The whole drawing: edges with arrowheads under boxes coloured by kind, with tooltips."""
    boxes = node_boxes(G, pos)
    width, height = canvas_size(boxes)
    out = [_HEAD.format(w=width, h=height, fs=FONT_SIZE, text=TEXT_COLOUR, edge=EDGE_COLOUR,
                        family=FONT_FAMILY),
           f'<g fill="none" stroke="{EDGE_COLOUR}" stroke-width="1">\n']
    for _, points in edge_polylines(G, boxes, pos, edge_points):
        coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        out.append(f'<polyline points="{coords}" marker-end="url(#arrow)"/>\n')
    out.append("</g>\n")
    for node, box in boxes.items():
        fill = KIND_FILL.get(box.kind, KIND_FILL["other"])
        tip = escape(node_tooltip(G.nodes[node]))
        first, second = node_lines(G.nodes[node])
        text = [(first, box.cy - box.height / 4 + FONT_SIZE * 0.35)]  # as the app: two halves
        if second:
            text.append((second, box.cy + box.height / 4 + FONT_SIZE * 0.3))
        out.append(
            f'<g id={quoteattr(f"n{node}")}><title>{tip}</title>'
            f'<rect x="{box.left:.1f}" y="{box.top:.1f}" width="{box.width:.1f}" '
            f'height="{box.height:.1f}" rx="6" fill="{fill}" stroke="{BORDER_COLOUR}"/>'
            + "".join(f'<text x="{box.cx:.1f}" y="{y:.1f}" text-anchor="middle">'
                      f"{escape(elide_middle(line))}</text>" for line, y in text)
            + "</g>\n"
        )
    out.append("</svg>\n")
    return "".join(out)
