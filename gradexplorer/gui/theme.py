"""The app's look: stylesheet, icons, plot defaults and highlight colours (the graph's own
palette is ``core.graph.style``, shared with the exports)."""

from __future__ import annotations

import re
import sys
from functools import cache

import shiboken6
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QIcon, QPalette
from PySide6.QtWidgets import QApplication

from gradexplorer.resources import resource_path

ACCENT = "#1e88e5"
SELECTION = "#ff6f00"
ALARM = "#d32f2f"
PLOT_PENS = {"loss": "#1e88e5", "norm": "#e53935", "mean": "#1e88e5", "max": "#e53935",
             "current": "#1e88e5", "previous": "#b0bec5"}


ICON_INK = "#37474f"  # the icons' line colour; the dark theme draws it light
DARK_ICON_INK = "#cfd8dc"
_ICON_NAMES: dict[int, str] = {}  # QIcon.cacheKey() -> icon name, to redraw icons on a switch


def icon(name: str) -> QIcon:
    """The SVG icon ``resources/icons/<name>.svg`` in the current theme's ink."""
    return _themed_icon(name, current_theme())


@cache
def _themed_icon(name: str, theme: str) -> QIcon:
    path = resource_path("icons", f"{name}.svg")
    if theme == "dark":
        folder = _dark_icon_folder()
        dark = folder / f"{name}.svg"
        if not dark.exists():
            dark.write_text(path.read_text(encoding="utf-8").replace(ICON_INK, DARK_ICON_INK),
                            encoding="utf-8")
        path = dark
    made = QIcon(str(path))
    _ICON_NAMES[made.cacheKey()] = name
    return made


@cache
def _dark_icon_folder():
    import tempfile
    from pathlib import Path

    return Path(tempfile.mkdtemp(prefix="gradexplorer-icons-"))


def retint_icons(app: QApplication) -> None:
    """Give every action and button showing one of the app's icons its current-theme ink."""
    from PySide6.QtWidgets import QAbstractButton

    for widget in app.allWidgets():
        if not shiboken6.isValid(widget):
            continue
        holders = list(widget.actions())
        if isinstance(widget, QAbstractButton):
            holders.append(widget)
        for holder in holders:
            name = _ICON_NAMES.get(holder.icon().cacheKey())
            if name is not None:
                holder.setIcon(icon(name))


THEMES = ("system", "light", "dark")
# The dark theme is the light stylesheet with each colour swapped (one pass, so no chains).
DARK_COLOURS = {
    "#f5f7f8": "#1e2326", "#263238": "#dfe6ea", "#eceff1": "#2a3135", "#cfd8dc": "#3a444a",
    "#dfe6ea": "#34404a", "#9aa7ad": "#6b7a82", "#cfe3f7": "#1f4a70", "#e3e8eb": "#263036",
    "#37474f": "#cfd8dc", "#ffffff": "#161b1e", "#f7f9fa": "#1b2124", "#d5dde1": "#37434a",
    "#455a64": "#b0bec5", "#c5d0d5": "#46545c", "#b0bec5": "#5a6a72", "#eef3f6": "#2c363c",
    "#dfe5e8": "#2e383e", "#b71c1c": "#ef9a9a", "#1565c0": "#90caf9",
}
PLOT_COLOURS = {"light": ("#ffffff", "#37474f"), "dark": ("#161b1e", "#cfd8dc")}
GRAPH_BACKGROUND = {"light": "#fbfcfc", "dark": "#20272b"}


def system_theme() -> str:
    """``dark`` when the desktop asks for a dark colour scheme, else ``light``."""
    hints = QGuiApplication.styleHints()
    scheme = getattr(hints, "colorScheme", None)
    return "dark" if scheme is not None and scheme() == Qt.ColorScheme.Dark else "light"


def resolved(theme: str) -> str:
    """``light`` or ``dark`` (``system`` follows the desktop)."""
    return system_theme() if theme == "system" else theme


def stylesheet(theme: str = "light") -> str:
    """The app's Qt stylesheet text for ``light`` or ``dark``."""
    text = resource_path("style.qss").read_text(encoding="utf-8")
    if theme == "dark":
        text = text.replace("selection-color: #ffffff", "selection-color: @white")
        text = re.sub("|".join(DARK_COLOURS), lambda m: DARK_COLOURS[m.group(0)], text)
        text = text.replace("@white", "#ffffff").replace("light theme", "dark theme")
    border, fill, hover = CHECK_BOX_COLOURS["dark" if theme == "dark" else "light"]
    tick = resource_path("icons", "check-mark.svg").as_posix()
    return text + (CHECK_BOXES.replace("@border", border).replace("@fill", fill)
                   .replace("@hover", hover).replace("@tick", tick))


# Fusion outlines a check box in the window colour darkened: 1.65:1 on the light window, and
# on the dark one it vanished (1.1:1); a border of 3:1 at least (WCAG 1.4.11), a filled,
# ticked box when checked; the room Fusion leaves after the label kept ("log y☐ smooth")
CHECK_BOX_COLOURS = {"light": ("#607d8b", "#ffffff", "#1e88e5"), "dark": ("#8a9aa3", "#161b1e", "#90caf9")}
CHECK_BOXES = """
QCheckBox { padding-right: 5px; }
QCheckBox::indicator { width: 12px; height: 12px; border: 1px solid @border; border-radius: 2px;
    background: @fill; }
QCheckBox::indicator:hover { border-color: @hover; }
QCheckBox::indicator:checked { background: #1e88e5; border-color: #1e88e5; image: url(@tick); }
QCheckBox::indicator:disabled { border-color: #90a4ae; }
QCheckBox::indicator:checked:disabled { background: #90a4ae; border-color: #90a4ae; }
"""


def dark_palette() -> QPalette:
    """Fusion's palette in dark colours (menus, scroll bars, check boxes the sheet leaves)."""
    palette = QPalette()
    for role, colour in ((QPalette.Window, "#1e2326"), (QPalette.WindowText, "#dfe6ea"),
                         (QPalette.Base, "#161b1e"), (QPalette.AlternateBase, "#1b2124"),
                         (QPalette.Text, "#dfe6ea"), (QPalette.Button, "#2a3135"),
                         (QPalette.ButtonText, "#dfe6ea"), (QPalette.ToolTipBase, "#2a3135"),
                         (QPalette.ToolTipText, "#dfe6ea"), (QPalette.Highlight, ACCENT),
                         (QPalette.HighlightedText, "#ffffff"), (QPalette.PlaceholderText, "#7d8a91"),
                         (QPalette.Mid, "#3a444a"), (QPalette.Dark, "#111518")):
        palette.setColor(role, QColor(colour))
    palette.setColor(QPalette.Disabled, QPalette.Text, QColor("#6b7a82"))
    palette.setColor(QPalette.Disabled, QPalette.ButtonText, QColor("#6b7a82"))
    return palette


def configure_plots(theme: str = "light") -> None:
    """pyqtgraph defaults for plots made from now on (this imports pyqtgraph: the app's start
    calls it once its window has shown, before making its plots)."""
    import pyqtgraph as pg

    background, foreground = PLOT_COLOURS[theme]
    pg.setConfigOptions(background=background, foreground=foreground, antialias=False)


def restyle_plots(app: QApplication, theme: str) -> None:
    """Recolour the plots and graph views that already exist."""
    background, foreground = PLOT_COLOURS[theme]
    pg = sys.modules.get("pyqtgraph")  # not imported yet: no plot to recolour
    for widget in app.allWidgets():
        if not shiboken6.isValid(widget):  # a closed window's widget on its way out
            continue
        if pg is not None and isinstance(widget, pg.GraphicsView):
            widget.setBackground(background)
            scene = widget.scene()
            for item in scene.items() if scene is not None else ():
                if isinstance(item, pg.AxisItem):
                    item.setPen(foreground)
                    item.setTextPen(foreground)
                elif isinstance(item, pg.LegendItem):  # a key's box (where it has one): the
                    if item.opts["brush"].style() != Qt.NoBrush:  # plot's new colour
                        item.setBrush(background)
                elif isinstance(item, pg.LabelItem):  # plot titles: keep their text, new ink
                    item.setText(item.text, color=foreground)
        elif hasattr(widget, "use_theme"):  # widgets that colour themselves (the graph view)
            widget.use_theme(theme)


def apply_theme(app: QApplication, theme: str = "light", plots: bool = True) -> str:
    """Style the whole application in ``theme`` (``system``, ``light`` or ``dark``); returns
    the one applied. ``plots=False`` leaves pyqtgraph's defaults (and its import) for later,
    unless it is imported already."""
    name = resolved(theme)
    if plots or "pyqtgraph" in sys.modules:
        configure_plots(name)
    if app.property("gradexplorer_theme") == name:  # already in it: nothing to recolour
        return name
    app.setStyle("Fusion")
    app.setPalette(dark_palette() if name == "dark" else app.style().standardPalette())
    app.setStyleSheet(stylesheet(name))
    app.setWindowIcon(icon("gradexplorer"))
    app.setProperty("gradexplorer_theme", name)
    restyle_plots(app, name)
    retint_icons(app)
    return name


def current_theme() -> str:
    """The theme applied now (``light`` or ``dark``)."""
    app = QApplication.instance()
    return (app.property("gradexplorer_theme") if app is not None else None) or "light"


def steady_axes(plot_item, left_width: int = 56, steps: bool = False) -> None:
    """Readable axes (tick labels never overlap; whole steps on x when ``steps``: see
    plots/axes.py), the left one of a fixed width so that new tick labels never re-lay out the
    plot mid-run."""
    from gradexplorer.gui.plots.axes import readable_axes

    readable_axes(plot_item, steps)
    plot_item.getAxis("left").setWidth(left_width)


def value_ticks(plot_item, shown: bool) -> None:
    """Show or hide the left axis' tick labels (hidden while a plot has no data: in a short plot
    the placeholder range's labels pile up). Only a change touches the axis."""
    axis = plot_item.getAxis("left")
    if axis.style.get("showValues", True) != shown:
        axis.setStyle(showValues=shown)
