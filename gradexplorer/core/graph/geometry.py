"""Where nodes and edges of a laid-out graph are drawn: boxes and clipped polylines."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass

import networkx as nx

from gradexplorer.core.graph.style import NODE_HEIGHT, node_label, node_width

Point = tuple[float, float]
MARGIN = 20.0


@dataclass(frozen=True)
class Box:
    """A node's rectangle (centre and size) and its label."""

    node: Hashable
    cx: float
    cy: float
    width: float
    height: float
    label: str
    kind: str

    @property
    def left(self) -> float:
        return self.cx - self.width / 2

    @property
    def top(self) -> float:
        return self.cy - self.height / 2

    def border_point(self, toward: Point) -> Point:
        """Where the segment from the centre toward ``toward`` leaves the box."""
        dx, dy = toward[0] - self.cx, toward[1] - self.cy
        if dx == 0 and dy == 0:
            return self.cx, self.cy
        tx = self.width / 2 / abs(dx) if dx else float("inf")
        ty = self.height / 2 / abs(dy) if dy else float("inf")
        t = min(tx, ty, 1.0)
        return self.cx + dx * t, self.cy + dy * t


def node_boxes(G: nx.DiGraph, pos: Mapping[Hashable, Point]) -> dict[Hashable, Box]:
    """A box for every positioned node, shifted so the drawing starts at (MARGIN, MARGIN)."""
    boxes = {}
    for node, attrs in G.nodes(data=True):
        if node not in pos:
            continue
        x, y = pos[node]
        boxes[node] = Box(node, float(x), float(y), node_width(attrs), NODE_HEIGHT,
                          node_label(attrs), str(attrs.get("kind", "other")))
    if not boxes:
        return boxes
    dx = MARGIN - min(b.left for b in boxes.values())
    dy = MARGIN - min(b.top for b in boxes.values())
    return {n: Box(n, b.cx + dx, b.cy + dy, b.width, b.height, b.label, b.kind)
            for n, b in boxes.items()}


def canvas_size(boxes: Mapping[Hashable, Box]) -> tuple[float, float]:
    """Width and height that hold every box plus the margin."""
    if not boxes:
        return 2 * MARGIN, 2 * MARGIN
    return (max(b.left + b.width for b in boxes.values()) + MARGIN,
            max(b.top + b.height for b in boxes.values()) + MARGIN)


def edge_polylines(G: nx.DiGraph, boxes: Mapping[Hashable, Box], pos: Mapping[Hashable, Point],
                   edge_points: Mapping[tuple, list[Point]] | None = None) -> list[tuple[tuple, list[Point]]]:
    """Each edge as points from its source box's border, through its bends, to its target's."""
    if not boxes:
        return []
    any_box = next(iter(boxes.values()))
    shift = (any_box.cx - pos[any_box.node][0], any_box.cy - pos[any_box.node][1])
    lines = []
    for u, v in G.edges:
        if u not in boxes or v not in boxes:
            continue
        a, b = boxes[u], boxes[v]
        bends = [(x + shift[0], y + shift[1]) for x, y in (edge_points or {}).get((u, v), [])]
        start = a.border_point(bends[0] if bends else (b.cx, b.cy))
        end = b.border_point(bends[-1] if bends else (a.cx, a.cy))
        lines.append(((u, v), [start, *bends, end]))
    return lines
