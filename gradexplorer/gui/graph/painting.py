"""Drawing nodes and edges of a GraphDrawing with few, batched QPainter calls."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QLineF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QImage, QPainter, QPen

from gradexplorer.core.graph import style
from gradexplorer.gui.graph.drawing import KIND_CODES, NODE_H, NODE_W, GraphDrawing
from gradexplorer.gui.text.name_elide import elide_to_width

EDGE_COLOUR = QColor(style.EDGE_COLOUR)
BORDER_COLOUR = QColor(style.BORDER_COLOUR)
TEXT_COLOUR = QColor(style.TEXT_COLOUR)
TEXT_LOD = 0.33  # pixels per scene unit above which labels are drawn
BORDER_LOD = 0.12
ROUNDED_MAX = 400  # rounded corners only when few nodes are on screen
KIND_RGBA = np.array([QColor(style.KIND_FILL[k]).rgba() for k in KIND_CODES], dtype=np.uint32)


def base_fills(drawing: GraphDrawing) -> np.ndarray:
    """Each node's fill (ARGB) by its kind."""
    return KIND_RGBA[drawing.kinds.astype(np.int64)]


def paint_edges(painter: QPainter, drawing: GraphDrawing, edges: np.ndarray) -> None:
    """Straight lines from the bottom of each consumer to the top of its input."""
    if not len(edges):
        return
    a = drawing.xy[drawing.edges[edges, 0]].copy()
    b = drawing.xy[drawing.edges[edges, 1]].copy()
    down = b[:, 1] > a[:, 1] + NODE_H
    a[down, 1] += NODE_H / 2
    b[down, 1] -= NODE_H / 2
    pen = QPen(EDGE_COLOUR)
    pen.setCosmetic(True)
    painter.setPen(pen)
    painter.drawLines([QLineF(x1, y1, x2, y2) for x1, y1, x2, y2 in np.hstack([a, b]).tolist()])


def node_rects(drawing: GraphDrawing, nodes: np.ndarray, grow: float = 0.0) -> list[QRectF]:
    """Boxes of ``nodes`` (grown by ``grow`` on every side)."""
    w, h = NODE_W + 2 * grow, NODE_H + 2 * grow
    return [QRectF(x - w / 2, y - h / 2, w, h) for x, y in drawing.xy[nodes].tolist()]


def paint_nodes(painter: QPainter, drawing: GraphDrawing, nodes: np.ndarray, fills: np.ndarray,
                lod: float) -> None:
    """Filled boxes grouped by colour; borders and round corners only when zoomed in."""
    if not len(nodes):
        return
    if lod >= BORDER_LOD:
        pen = QPen(BORDER_COLOUR, 0)
        painter.setPen(pen)
    else:
        painter.setPen(Qt.NoPen)
    rounded = len(nodes) <= ROUNDED_MAX and lod >= BORDER_LOD
    values, groups = np.unique(fills[nodes], return_inverse=True)
    for g, value in enumerate(values.tolist()):
        painter.setBrush(QColor.fromRgba(value))
        rects = node_rects(drawing, nodes[groups == g])
        if rounded:
            for rect in rects:
                painter.drawRoundedRect(rect, 6, 6)
        else:
            painter.drawRects(rects)


def paint_labels(painter: QPainter, drawing: GraphDrawing, nodes: np.ndarray) -> None:
    """Two lines of text inside each node box, elided to fit."""
    font = QFont()
    font.setPixelSize(16)
    painter.setFont(font)
    metrics = painter.fontMetrics()
    painter.setPen(TEXT_COLOUR)
    for i, (x, y) in zip(nodes.tolist(), drawing.xy[nodes].tolist(), strict=True):
        first, second = drawing.labels[i]
        width = int(NODE_W - 10)
        top = QRectF(x - NODE_W / 2 + 5, y - NODE_H / 2 + 1, NODE_W - 10, NODE_H / 2)
        painter.drawText(top, Qt.AlignCenter, fitted_label(first, metrics, width))
        if second:
            bottom = top.translated(0, NODE_H / 2 - 2)
            painter.drawText(bottom, Qt.AlignCenter, fitted_label(second, metrics, width))


def fitted_label(text: str, metrics, width: int) -> str:
    """A node label in ``width`` pixels: a dotted module name loses components on the left
    (``…h.10.attn``), and a trailing figure (`` · ‖g‖ 0.0011``) is always kept whole."""
    if metrics.horizontalAdvance(text) <= width:
        return text
    head, sep, tail = text.rpartition(" · ")
    if not sep:
        head, tail = text, ""
    room = width - metrics.horizontalAdvance(sep + tail)
    return elide_to_width(head, metrics.horizontalAdvance, room) + sep + tail


def paint_outlines(painter: QPainter, drawing: GraphDrawing, nodes, colour: str, width: float,
                   grow: float) -> None:
    """Coloured rings around ``nodes`` (selection, search matches, hooked modules)."""
    if nodes is None or not len(nodes):
        return
    pen = QPen(QColor(colour), width)
    pen.setCosmetic(True)
    painter.setPen(pen)
    painter.setBrush(Qt.NoBrush)
    painter.drawRects(node_rects(drawing, np.asarray(nodes, dtype=np.int64), grow))


def render_overview(drawing: GraphDrawing, fills: np.ndarray, scale: float) -> QImage:
    """The whole graph at ``scale`` pixels per scene unit (safe off the GUI thread)."""
    left, top, width, height = drawing.bounds()
    image = QImage(max(1, int(width * scale) + 1), max(1, int(height * scale) + 1),
                   QImage.Format_ARGB32_Premultiplied)
    image.fill(Qt.transparent)
    painter = QPainter(image)
    painter.scale(scale, scale)
    painter.translate(-left, -top)
    everything = np.arange(len(drawing))
    paint_edges(painter, drawing, np.arange(len(drawing.edges)))
    paint_nodes(painter, drawing, everything, fills, scale)
    painter.end()
    return image
