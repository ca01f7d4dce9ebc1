"""One graphics item that draws a whole graph: a cached overview far out, culled vectors near."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QRectF
from PySide6.QtGui import QImage, QPainter
from PySide6.QtWidgets import QGraphicsItem, QGraphicsObject, QStyleOptionGraphicsItem

from gradexplorer.core.graph.style import HOOK_MARK
from gradexplorer.gui.graph.drawing import GraphDrawing
from gradexplorer.gui.graph.painting import (
    TEXT_LOD,
    base_fills,
    paint_edges,
    paint_labels,
    paint_nodes,
    paint_outlines,
)
from gradexplorer.gui.theme import ACCENT, ALARM, SELECTION

HIGHLIGHTS = ("selected", "matches", "marked", "origin")
OVERVIEW_MIN_NODES = 1500  # below this, vectors are fast enough at every zoom
OVERVIEW_MAX_PIXELS = 24_000_000
OVERVIEW_MAX_SIDE = 16_000


def overview_scale(drawing: GraphDrawing) -> float:
    """Pixels per scene unit of the cached overview image (0: no overview needed)."""
    if len(drawing) < OVERVIEW_MIN_NODES:
        return 0.0
    _, _, w, h = drawing.bounds()
    scale = min(0.5, OVERVIEW_MAX_SIDE / max(w, h), (OVERVIEW_MAX_PIXELS / (w * h)) ** 0.5)
    return float(scale)


class GraphCanvas(QGraphicsObject):
    """Draws a :class:`GraphDrawing`; highlights are index arrays into it."""

    def __init__(self) -> None:
        super().__init__()
        self.setFlag(QGraphicsItem.ItemUsesExtendedStyleOption, True)
        self.drawing: GraphDrawing | None = None
        self.fills = np.empty(0, dtype=np.uint32)
        self.overview: QImage | None = None
        self.overview_scale = 0.0
        self.selected = np.empty(0, dtype=np.int64)
        self.matches = np.empty(0, dtype=np.int64)
        self.marked = np.empty(0, dtype=np.int64)
        self.origin = np.empty(0, dtype=np.int64)  # where NaN/Inf was born: a double red ring
        self._bounds = QRectF()

    def set_drawing(self, drawing: GraphDrawing, overview: QImage | None = None,
                    scale: float = 0.0) -> None:
        """Show a new graph (with its pre-rendered overview, if large)."""
        self.prepareGeometryChange()
        self.drawing = drawing
        self.fills = base_fills(drawing)
        self.overview, self.overview_scale = overview, scale if overview is not None else 0.0
        self._bounds = QRectF(*drawing.bounds())
        for name in HIGHLIGHTS:
            setattr(self, name, np.empty(0, dtype=np.int64))
        self.update()

    def clear(self) -> None:
        """Draw nothing."""
        self.prepareGeometryChange()
        self.drawing, self.overview, self.overview_scale = None, None, 0.0
        self.fills = np.empty(0, dtype=np.uint32)
        self._bounds = QRectF()
        for name in HIGHLIGHTS:
            setattr(self, name, np.empty(0, dtype=np.int64))
        self.update()

    def set_fills(self, fills: np.ndarray) -> None:
        """New node colours (ARGB per node)."""
        self.fills = fills
        self.update()

    def set_overview(self, image: QImage, scale: float) -> None:
        """A freshly rendered overview image."""
        self.overview, self.overview_scale = image, scale
        self.update()

    def set_highlights(self, selected=None, matches=None, marked=None, origin=None) -> None:
        """Replace whichever highlight sets are given (index sequences)."""
        for name, value in (("selected", selected), ("matches", matches), ("marked", marked),
                            ("origin", origin)):
            if value is not None:
                setattr(self, name, np.asarray(value, dtype=np.int64))
        self.update()

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt API
        return self._bounds

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget=None) -> None:
        if self.drawing is None or not len(self.drawing):
            return
        lod = QStyleOptionGraphicsItem.levelOfDetailFromTransform(painter.worldTransform())
        exposed = option.exposedRect
        box = (exposed.left(), exposed.top(), exposed.right(), exposed.bottom())
        if self.overview is not None and lod < self.overview_scale * 1.25:
            self._paint_overview(painter, exposed)
            visible = None
        else:
            visible = self.drawing.visible_nodes(*box)
            paint_edges(painter, self.drawing, self.drawing.visible_edges(*box))
            paint_nodes(painter, self.drawing, visible, self.fills, lod)
            if lod >= TEXT_LOD:
                paint_labels(painter, self.drawing, visible)
        self._paint_highlights(painter, visible)

    def _paint_overview(self, painter: QPainter, exposed: QRectF) -> None:
        s = self.overview_scale
        source = exposed.intersected(self._bounds)
        image_rect = QRectF((source.left() - self._bounds.left()) * s,
                            (source.top() - self._bounds.top()) * s, source.width() * s,
                            source.height() * s)
        painter.setRenderHint(QPainter.SmoothPixmapTransform, True)
        painter.drawImage(source, self.overview, image_rect)

    def _paint_highlights(self, painter: QPainter, visible: np.ndarray | None) -> None:
        def shown(nodes: np.ndarray) -> np.ndarray:
            return nodes if visible is None else nodes[np.isin(nodes, visible)]

        paint_outlines(painter, self.drawing, shown(self.marked), HOOK_MARK, 3, 6)
        for grow in (9, 16):  # a double ring, apart from the selection's single one
            paint_outlines(painter, self.drawing, shown(self.origin), ALARM, 3, grow)
        paint_outlines(painter, self.drawing, shown(self.matches), ACCENT, 3, 10)
        paint_outlines(painter, self.drawing, shown(self.selected), SELECTION, 4, 3)
