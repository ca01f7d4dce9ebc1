"""The app's look: stylesheet, icons, plot defaults and highlight colours (the graph's own
palette is ``core.graph.style``, shared with the exports)."""

from __future__ import annotations

from functools import cache

import pyqtgraph as pg
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QApplication

from gradexplorer.resources import resource_path

ACCENT = "#1e88e5"
SELECTION = "#ff6f00"
ALARM = "#d32f2f"
PLOT_PENS = {"loss": "#1e88e5", "norm": "#e53935", "mean": "#1e88e5", "max": "#e53935",
             "current": "#1e88e5", "previous": "#b0bec5"}


@cache
def icon(name: str) -> QIcon:
    """The SVG icon ``resources/icons/<name>.svg``."""
    return QIcon(str(resource_path("icons", f"{name}.svg")))


def stylesheet() -> str:
    """The app's Qt stylesheet text."""
    return resource_path("style.qss").read_text(encoding="utf-8")


def configure_plots() -> None:
    """pyqtgraph defaults matching the light theme."""
    pg.setConfigOptions(background="w", foreground="#37474f", antialias=False)


def apply_theme(app: QApplication) -> None:
    """Style the whole application."""
    app.setStyle("Fusion")
    app.setStyleSheet(stylesheet())
    app.setWindowIcon(icon("gradexplorer"))
    configure_plots()


def steady_axes(plot_item, left_width: int = 56) -> None:
    """Fix the left axis width so that new tick labels never re-lay out the plot mid-run."""
    plot_item.getAxis("left").setWidth(left_width)
