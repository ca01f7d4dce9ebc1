"""Saving the graph or a plot as PNG or SVG (atomically, by file extension)."""

from __future__ import annotations

from pathlib import Path

import pyqtgraph as pg
import pyqtgraph.exporters  # noqa: F401 - registers pg.exporters
from PySide6.QtCore import QBuffer, QIODevice, QRectF, QSize, Qt
from PySide6.QtGui import QImage, QPainter
from PySide6.QtWidgets import QGraphicsScene

from gradexplorer.core.files.atomic_file import write_atomic
from gradexplorer.core.messages.errors import UserError

FORMATS = (".png", ".svg")
MAX_SIDE = 8000


def _check(path: Path) -> Path:
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise UserError(f"{path.name}: save as .png or .svg")
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def image_bytes(image: QImage, suffix: str) -> bytes:
    """``image`` encoded by the file suffix (``.png``, ``.jpg``…)."""
    buffer = QBuffer()
    buffer.open(QIODevice.WriteOnly)
    if not image.save(buffer, suffix.lstrip(".").upper()):
        raise UserError(f"could not encode the image as {suffix}")
    return bytes(buffer.data())


def write_image(image: QImage, path: Path) -> Path:
    """Save ``image`` atomically (``core.files.atomic_file``), its format chosen by the suffix."""
    path = Path(path)
    write_atomic(path, image_bytes(image, path.suffix))
    return path


def save_scene(scene: QGraphicsScene, rect: QRectF, path: Path, background=None,
               title: str = "gradexplorer backward graph") -> Path:
    """Render ``rect`` of ``scene`` to PNG (on white, at most MAX_SIDE pixels a side) or SVG
    (on ``background``, a QBrush or QColor, if given; titled ``title``)."""
    path = _check(path)
    scale = min(1.0, MAX_SIDE / max(rect.width(), rect.height(), 1.0))
    size = QSize(max(1, int(rect.width() * scale)), max(1, int(rect.height() * scale)))
    if path.suffix.lower() == ".svg":
        from PySide6.QtSvg import QSvgGenerator

        buffer = QBuffer()
        buffer.open(QIODevice.WriteOnly)
        generator = QSvgGenerator()
        generator.setOutputDevice(buffer)
        generator.setSize(size)
        generator.setResolution(QImage(1, 1, QImage.Format_ARGB32).logicalDpiX())  # as on screen
        generator.setViewBox(QRectF(0, 0, size.width(), size.height()))
        generator.setTitle(title)
        painter = QPainter(generator)
        if background is not None:
            painter.fillRect(QRectF(0, 0, size.width(), size.height()), background)
        scene.render(painter, QRectF(0, 0, size.width(), size.height()), rect)
        painter.end()
        write_atomic(path, bytes(buffer.data()))
    else:
        image = QImage(size, QImage.Format_ARGB32)
        image.fill(Qt.white)
        painter = QPainter(image)
        painter.setRenderHint(QPainter.Antialiasing, True)
        scene.render(painter, QRectF(0, 0, size.width(), size.height()), rect)
        painter.end()
        write_image(image, path)
    return path


PLOT_WIDTH, PLOT_DPI = 1600, 144  # saved plot images: wide enough to read on a slide


def save_plot(plot, path: Path, width: int = PLOT_WIDTH, dpi: int = PLOT_DPI) -> Path:
    """Save a pyqtgraph plot (a PlotWidget, PlotItem or layout): PNG by pyqtgraph's image
    exporter, ``width`` pixels wide (the height in the plot's proportions, at most MAX_SIDE
    a side) and marked ``dpi``; SVG drawn by Qt's own SVG generator from the plot's scene, on
    the plot's background (pyqtgraph's SVGExporter fails on this Qt: a ValueError in its
    coordinate fix-up)."""
    path = _check(path)
    item = getattr(plot, "plotItem", plot)
    if path.suffix.lower() == ".svg":
        views = item.scene().views() if item.scene() is not None else []
        background = views[0].backgroundBrush() if views else None
        return save_scene(item.scene(), item.sceneBoundingRect(), path, background,
                          title=f"gradexplorer {path.stem}")
    exporter = pg.exporters.ImageExporter(item)
    rect = item.sceneBoundingRect()
    scale = min(width / max(rect.width(), 1.0), MAX_SIDE / max(rect.height(), 1.0))
    exporter.parameters()["width"] = max(1, int(round(rect.width() * scale)))
    image = exporter.export(toBytes=True)
    dots_per_metre = int(round(dpi / 0.0254))
    image.setDotsPerMeterX(dots_per_metre)
    image.setDotsPerMeterY(dots_per_metre)
    write_image(image, path)
    return path
