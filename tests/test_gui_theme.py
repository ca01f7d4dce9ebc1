"""Light and dark themes: switched from the View menu, applied to every part, remembered."""

from __future__ import annotations

from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication


def lightness(colour) -> float:
    return QColor(colour).lightnessF()


def test_view_menu_switches_theme_everywhere_and_remembers(qtbot, make_window):
    window = make_window()
    app = QApplication.instance()
    try:
        window.theme_actions["dark"].trigger()
        assert window.settings.theme() == "dark"
        assert lightness(app.palette().color(QPalette.Window)) < 0.3
        assert "#1e2326" in app.styleSheet() and "#f5f7f8" not in app.styleSheet()
        flow = window.gradients.flow
        assert lightness(flow.backgroundBrush().color()) < 0.3
        assert lightness(window.graph_panel.view.backgroundBrush().color()) < 0.3
        axis = flow.plotItem.getAxis("bottom")
        assert lightness(axis.textPen().color()) > 0.6  # light text on the dark plot
        window.theme_actions["light"].trigger()
        assert lightness(app.palette().color(QPalette.Window)) > 0.7
        assert lightness(flow.backgroundBrush().color()) > 0.9
        assert window.settings.theme() == "light"
    finally:
        window.set_theme("system")
