"""A graph as a PNG file drawn by the app's own canvas, offscreen (``gradexplorer graph``)."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
from PySide6.QtCore import QRectF
from PySide6.QtWidgets import QGraphicsScene

from gradexplorer.gui.app import application
from gradexplorer.gui.graph.canvas import GraphCanvas
from gradexplorer.gui.graph.core_api import layout_graph
from gradexplorer.gui.graph.layout_worker import lay_out
from gradexplorer.gui.image_export import save_scene


def write_graph_png(graph: nx.DiGraph, layout: str, path: str | Path) -> Path:
    """Lay ``graph`` out as the app does and save the window's drawing of it (atomically).

    Needs a Qt platform: the caller sets ``QT_QPA_PLATFORM=offscreen`` where there is no
    display. Large graphs are scaled down to at most 8000 pixels a side.
    """
    application()
    laid = lay_out(graph, layout, layout_graph)
    scene = QGraphicsScene()
    canvas = GraphCanvas()
    scene.addItem(canvas)
    canvas.set_drawing(laid.drawing)  # no overview image: every node drawn, labels when legible
    return save_scene(scene, QRectF(*laid.drawing.bounds()), Path(path))
