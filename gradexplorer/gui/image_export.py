"""Saving the graph or a plot as PNG or SVG (atomically, by file extension)."""

from __future__ import annotations

import os
from pathlib import Path

import pyqtgraph as pg
import pyqtgraph.exporters  # noqa: F401 - registers pg.exporters
from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QImage, QPainter
from PySide6.QtWidgets import QGraphicsScene

from gradexplorer.core.errors import UserError

FORMATS = (".png", ".svg")
MAX_SIDE = 8000


def _check(path: Path) -> Path:
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise UserError(f"{path.name}: save as .png or .svg")
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _tmp(path: Path) -> Path:
    return path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")


def save_scene(scene: QGraphicsScene, rect: QRectF, path: Path) -> Path:
    """Render ``rect`` of ``scene`` to PNG (at most MAX_SIDE pixels a side) or SVG."""
    path, tmp = _check(path), None
    tmp = _tmp(path)
    scale = min(1.0, MAX_SIDE / max(rect.width(), rect.height(), 1.0))
    size = QSize(max(1, int(rect.width() * scale)), max(1, int(rect.height() * scale)))
    if path.suffix.lower() == ".svg":
        from PySide6.QtSvg import QSvgGenerator

        generator = QSvgGenerator()
        generator.setFileName(str(tmp))
        generator.setSize(size)
        generator.setViewBox(QRectF(0, 0, size.width(), size.height()))
        generator.setTitle("gradexplorer backward graph")
        painter = QPainter(generator)
        scene.render(painter, QRectF(0, 0, size.width(), size.height()), rect)
        painter.end()
    else:
        image = QImage(size, QImage.Format_ARGB32)
        image.fill(Qt.white)
        painter = QPainter(image)
        painter.setRenderHint(QPainter.Antialiasing, True)
        scene.render(painter, QRectF(0, 0, size.width(), size.height()), rect)
        painter.end()
        if not image.save(str(tmp)):
            raise UserError(f"could not write {path}")
    tmp.replace(path)
    return path


def save_plot(plot, path: Path) -> Path:
    """Save a pyqtgraph plot (a PlotWidget or PlotItem) with pyqtgraph's own exporters."""
    path = _check(path)
    tmp = _tmp(path)
    item = getattr(plot, "plotItem", plot)
    svg = path.suffix.lower() == ".svg"
    (pg.exporters.SVGExporter if svg else pg.exporters.ImageExporter)(item).export(str(tmp))
    tmp.replace(path)
    return path
