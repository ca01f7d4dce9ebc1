"""The graph's viewport: wheel zoom, drag to pan, click to pick, zoom to fit or to nodes."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QEvent, QPoint, QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QWheelEvent
from PySide6.QtWidgets import QGraphicsScene, QGraphicsView, QToolTip, QWidget

from gradexplorer.core.graph.style import node_tooltip
from gradexplorer.gui.graph.canvas import GraphCanvas
from gradexplorer.gui.graph.drawing import NODE_H, NODE_W
from gradexplorer.gui.graph.minimap import Minimap
from gradexplorer.gui.graph.painting import TEXT_LOD
from gradexplorer.gui.theme import GRAPH_BACKGROUND, current_theme

MIN_SCALE, MAX_SCALE = 1e-4, 4.0
READABLE_SCALE = TEXT_LOD * 1.5  # a first view opens no smaller than this: labels are drawn
CLICK_SLOP = 4  # pixels a press may move and still count as a click
MIN_FIT_NODE_PX = 3  # fit shows the whole graph while its nodes are at least this tall


class GraphView(QGraphicsView):
    """Shows one :class:`GraphCanvas`; emits node indices the user clicks."""

    node_clicked = Signal(int)  # -1 for empty space
    node_double_clicked = Signal(int)
    context_requested = Signal(int, QPoint)  # node index (-1: none), global position

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.canvas = GraphCanvas()
        scene = QGraphicsScene(self)
        scene.setItemIndexMethod(QGraphicsScene.NoIndex)
        scene.addItem(self.canvas)
        self.setScene(scene)
        self.use_theme(current_theme())
        self.setRenderHint(QPainter.Antialiasing, False)
        self.setDragMode(QGraphicsView.ScrollHandDrag)
        self.setTransformationAnchor(QGraphicsView.AnchorUnderMouse)
        self.setResizeAnchor(QGraphicsView.AnchorViewCenter)
        self.setViewportUpdateMode(QGraphicsView.FullViewportUpdate)
        self.setOptimizationFlag(QGraphicsView.DontAdjustForAntialiasing, True)
        self._press: QPoint | None = None
        self._explained: tuple[object, dict] = (None, {})  # (graph, node -> explanation)
        self.fitted = None  # fit or first_view while the user has not zoomed or panned since:
        self.fitted_size = QSize()  # a resize of the view applies it again (a grown window shows
        self.minimap = Minimap(self)  # it all); the view's size when it was last applied
        for bar in (self.horizontalScrollBar(), self.verticalScrollBar()):
            bar.valueChanged.connect(self.minimap.follow_view)
            bar.actionTriggered.connect(self.user_moved)  # dragged, clicked, arrow keys

    def use_theme(self, theme: str) -> None:
        """The background for ``light`` or ``dark``."""
        self.setBackgroundBrush(QColor(GRAPH_BACKGROUND[theme]))

    @property
    def scale_factor(self) -> float:
        """Current pixels per scene unit."""
        return self.transform().m11()

    def zoom(self, factor: float) -> None:
        """Zoom by ``factor`` about the mouse (or the centre), within limits (no longer fitted:
        ``fit`` and ``first_view`` say so again after zooming)."""
        self.user_moved()
        target = min(MAX_SCALE, max(MIN_SCALE, self.scale_factor * factor))
        factor = target / self.scale_factor
        self.scale(factor, factor)
        self.minimap.follow_view()

    def wheelEvent(self, event: QWheelEvent) -> None:  # noqa: N802 - Qt API
        self.zoom(1.0015 ** event.angleDelta().y())

    def user_moved(self, *_action) -> None:
        """The user zoomed, panned or framed nodes: a resize keeps their view."""
        self.fitted = None

    def _fit_whole(self) -> None:
        rect = self.canvas.boundingRect()
        if rect.isEmpty():
            return
        self.fitInView(rect, Qt.KeepAspectRatio)
        if self.scale_factor > 1.0:
            self.zoom(1.0 / self.scale_factor)
        self.centerOn(rect.center())
        self.minimap.follow_view()

    def fit(self) -> None:
        """Show the whole graph (Ctrl+0) while its nodes stay boxes of MIN_FIT_NODE_PX or
        more; a graph too big for that (a chain of 2,000 operations: a hairline) opens at the
        readable scale on its top instead, the minimap showing the whole and where that is."""
        self.fitted = None  # (scroll bars shown or hidden while fitting resize the viewport)
        self._fit_whole()
        if not self.canvas.boundingRect().isEmpty() and self.scale_factor * NODE_H < MIN_FIT_NODE_PX:
            self._readable_top()
        self.fitted, self.fitted_size = self.fit, self.size()

    def first_view(self) -> None:
        """The whole graph if its labels stay readable that way; else the smallest readable
        scale on the graph's top (the loss, in the layered layout), the minimap showing where
        that is in the rest."""
        self.fitted = None
        self._fit_whole()
        if not self.canvas.boundingRect().isEmpty() and self.scale_factor < READABLE_SCALE:
            self._readable_top()
        self.fitted, self.fitted_size = self.first_view, self.size()

    def _readable_top(self) -> None:
        rect = self.canvas.boundingRect()
        self.zoom(READABLE_SCALE / self.scale_factor)
        height = self.viewport().height() / self.scale_factor
        self.centerOn(QPointF(rect.center().x(), rect.top() + height / 2))
        self.minimap.follow_view()

    def zoom_to(self, nodes) -> None:
        """Frame the given node indices."""
        drawing = self.canvas.drawing
        nodes = np.asarray(nodes, dtype=np.int64)
        if drawing is None or not len(nodes):
            return
        self.user_moved()
        xy = drawing.xy[nodes]
        lo, hi = xy.min(axis=0), xy.max(axis=0)
        rect = QRectF(lo[0] - NODE_W, lo[1] - 2 * NODE_H, hi[0] - lo[0] + 2 * NODE_W,
                      hi[1] - lo[1] + 4 * NODE_H)
        self.fitInView(rect, Qt.KeepAspectRatio)
        if self.scale_factor > 1.2:
            self.zoom(1.2 / self.scale_factor)
        self.centerOn(rect.center())
        self.minimap.follow_view()

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        if self.fitted is not None and self.size() != self.fitted_size:
            self.fitted()  # still the fitted view: fitted again to the view's new size (not on
            # the viewport's: the minimap's strip and scroll bars it brings would ping-pong)
        self.minimap.follow_view()

    def node_at(self, pos: QPoint) -> int:
        """Node index under viewport position ``pos``, or -1."""
        drawing = self.canvas.drawing
        if drawing is None:
            return -1
        p = self.mapToScene(pos)
        slack = 3 / max(self.scale_factor, 1e-9)  # a few pixels of tolerance when zoomed out
        hit = drawing.node_at(p.x(), p.y(), slack)
        return -1 if hit is None else hit

    def tooltip_at(self, pos: QPoint) -> str:
        """The full, unelided label of the node under ``pos`` ('' over empty space)."""
        index = self.node_at(pos)
        drawing = self.canvas.drawing
        if index < 0 or drawing is None:
            return ""
        tips = getattr(drawing, "tips", None)
        if tips is not None:  # a drawing from the graph cache: no graph behind it yet
            return tips[index]
        node = drawing.ids[index]
        attrs = drawing.graph.nodes[node]
        if attrs.get("explanation"):
            return node_tooltip(attrs)
        return node_tooltip({**attrs, "explanation": self.explanation(drawing.graph, node)})

    def explanation(self, graph, node) -> str:
        """What ``node`` computes, made on first hover and kept here, per graph: never written
        into the graph's node dicts, which the layout thread reads."""
        kept_for, kept = self._explained
        if kept_for is not graph:
            self._explained = (graph, {})
            kept = self._explained[1]
        if node not in kept:
            from gradexplorer.gui.graph.core_api import explain_node

            kept[node] = explain_node(graph, node)
        return kept[node]

    def viewportEvent(self, event) -> bool:  # noqa: N802 - Qt API
        if event.type() == QEvent.ToolTip:
            text = self.tooltip_at(event.pos())
            if text:
                QToolTip.showText(event.globalPos(), text, self.viewport())
            else:
                QToolTip.hideText()
            return True
        return super().viewportEvent(event)

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        if event.button() == Qt.LeftButton:
            self._press = event.position().toPoint()
        super().mousePressEvent(event)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        super().mouseReleaseEvent(event)
        if event.button() == Qt.LeftButton and self._press is not None:
            moved = (event.position().toPoint() - self._press).manhattanLength()
            self._press = None
            if moved > CLICK_SLOP:  # a drag: panned
                self.user_moved()
            else:
                self.node_clicked.emit(self.node_at(event.position().toPoint()))

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        index = self.node_at(event.position().toPoint())
        if index >= 0:
            self.node_double_clicked.emit(index)

    def contextMenuEvent(self, event) -> None:  # noqa: N802
        self.context_requested.emit(self.node_at(event.pos()), event.globalPos())
