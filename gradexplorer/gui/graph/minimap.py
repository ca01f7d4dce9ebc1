"""The overview in the graph's corner: the whole graph, the part in view, click to go there."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QImage, QMouseEvent, QPainter, QPalette, QPen
from PySide6.QtWidgets import QGraphicsView, QWidget

from gradexplorer.gui.graph.drawing import GraphDrawing
from gradexplorer.gui.theme import SELECTION

SIDE = 170  # the longer side of the minimap, in pixels, in a roomy view
SHARE = 0.28  # ... and at most this share of the view's shorter side (small panels)
MARGIN = 8
SMALL_VIEW = 480  # a view whose shorter side is below this gives the map a strip of its own
BACKGROUND_ALPHA = 225  # the graph shows faintly through


class Minimap(QWidget):
    """A thumbnail of ``view``'s graph; hidden while the whole graph is in view."""

    def __init__(self, view: QGraphicsView) -> None:
        super().__init__(view)
        self.view = view
        self.setCursor(Qt.PointingHandCursor)
        self.setToolTip("overview: click or drag to move the view")
        self._image: QImage | None = None
        self._bounds = QRectF()
        self._following = False
        self.hide()

    def set_drawing(self, drawing: GraphDrawing | None, fills: np.ndarray | None = None) -> None:
        """Render the thumbnail of a new (or recoloured) graph."""
        if drawing is None or not len(drawing):
            self._image = None
            self.follow_view()
            return
        self._bounds = QRectF(*drawing.bounds())
        w, h = self._bounds.width(), self._bounds.height()
        scale = SIDE / max(w, h)
        size = (max(24, int(w * scale)), max(24, int(h * scale)))
        image = QImage(*size, QImage.Format_ARGB32_Premultiplied)
        image.fill(Qt.transparent)  # the theme's background is painted under it
        painter = QPainter(image)
        xy = (drawing.xy - (self._bounds.left(), self._bounds.top())) * (size[0] / w, size[1] / h)
        colours = fills if fills is not None and len(fills) == len(drawing) else None
        painter.setPen(QPen(QColor("#607d8b"), 2))
        if colours is None:
            painter.drawPoints([QPointF(x, y) for x, y in xy.tolist()])
        else:
            for value in np.unique(colours):
                painter.setPen(QPen(QColor.fromRgba(int(value)), 2))
                painter.drawPoints([QPointF(x, y) for x, y in xy[colours == value].tolist()])
        painter.end()
        self._image = image
        self.follow_view()

    def visible_scene_rect(self) -> QRectF:
        """The part of the scene the view shows."""
        return self.view.mapToScene(self.view.viewport().rect()).boundingRect()

    def follow_view(self) -> None:
        """Show only while part of the graph is out of view: in the view's corner when the view
        is roomy, in a strip of its own beside the graph when the view is small (a corner of a
        small view always holds nodes the map would cover)."""
        if self._following:  # the strip's margin resizes the viewport, which calls us again
            return
        self._following = True
        try:
            self._follow_view()
        finally:
            self._following = False

    def _follow_view(self) -> None:
        whole_in_view = self.visible_scene_rect().contains(self._bounds)
        if self._image is None or whole_in_view:
            self.hide()
            self._set_strip(0)
            return
        room = self.view.contentsRect()  # the view's whole inside: no feedback from the strip
        fit = min(1.0, SHARE * min(room.width(), room.height()) / SIDE)
        self.setFixedSize(max(24, int(self._image.width() * fit)),
                          max(24, int(self._image.height() * fit)))
        small = min(room.width(), room.height()) < SMALL_VIEW
        self._set_strip(self.width() + 2 * MARGIN if small else 0)
        viewport = self.view.viewport().geometry()
        left = viewport.right() + MARGIN if small else viewport.right() - self.width() - MARGIN
        self.move(left, viewport.bottom() - self.height() - MARGIN)
        self.show()
        self.raise_()
        self.update()

    def _set_strip(self, width: int) -> None:
        """Keep ``width`` pixels right of the viewport for the map (0: none)."""
        if self.view.viewportMargins().right() != width:
            self.view.setViewportMargins(0, 0, width, 0)

    def _to_map(self, rect: QRectF) -> QRectF:
        sx, sy = self.width() / self._bounds.width(), self.height() / self._bounds.height()
        return QRectF((rect.left() - self._bounds.left()) * sx, (rect.top() - self._bounds.top()) * sy,
                      rect.width() * sx, rect.height() * sy)

    def scene_point(self, x: float, y: float) -> QPointF:
        """The scene point under minimap pixel (x, y)."""
        return QPointF(self._bounds.left() + x * self._bounds.width() / self.width(),
                       self._bounds.top() + y * self._bounds.height() / self.height())

    def paintEvent(self, _event) -> None:  # noqa: N802 - Qt API
        if self._image is None:
            return
        painter = QPainter(self)
        painter.setRenderHint(QPainter.SmoothPixmapTransform, True)
        background = self.palette().color(QPalette.Base)  # follows a runtime theme switch
        background.setAlpha(BACKGROUND_ALPHA)
        painter.fillRect(self.rect(), background)
        painter.drawImage(QRectF(self.rect()), self._image)
        painter.setPen(QPen(QColor("#90a4ae"), 1))
        painter.drawRect(self.rect().adjusted(0, 0, -1, -1))
        painter.setPen(QPen(QColor(SELECTION), 2))
        painter.drawRect(self._to_map(self.visible_scene_rect()).intersected(QRectF(self.rect())))

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt API
        self._go(event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt API
        if event.buttons() & Qt.LeftButton:
            self._go(event)

    def _go(self, event: QMouseEvent) -> None:
        p = event.position()
        self.view.user_moved()
        self.view.centerOn(self.scene_point(p.x(), p.y()))
        self.follow_view()
