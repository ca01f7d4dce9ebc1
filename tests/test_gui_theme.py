"""Light and dark themes: switched from the View menu, applied to every part, remembered."""

from __future__ import annotations

from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication, QStyle


def lightness(colour) -> float:
    return QColor(colour).lightnessF()


def test_view_menu_switches_theme_everywhere_and_remembers(qtbot, make_window):
    window = make_window()
    app = QApplication.instance()
    try:
        window.menus.theme_actions["dark"].trigger()
        assert window.settings.theme() == "dark"
        assert lightness(app.palette().color(QPalette.Window)) < 0.3
        assert "#1e2326" in app.styleSheet() and "#f5f7f8" not in app.styleSheet()
        flow = window.gradients.flow
        assert lightness(flow.backgroundBrush().color()) < 0.3
        assert lightness(window.graph_panel.view.backgroundBrush().color()) < 0.3
        axis = flow.plotItem.getAxis("bottom")
        assert lightness(axis.textPen().color()) > 0.6  # light text on the dark plot
        window.menus.theme_actions["light"].trigger()
        assert lightness(app.palette().color(QPalette.Window)) > 0.7
        assert lightness(flow.backgroundBrush().color()) > 0.9
        assert window.settings.theme() == "light"
    finally:
        window.set_theme("system")


def contrast(a, b) -> float:
    """WCAG contrast ratio of two colours."""
    def luminance(colour) -> float:
        c = QColor(colour)
        parts = [v / 255 for v in (c.red(), c.green(), c.blue())]
        parts = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in parts]
        return 0.2126 * parts[0] + 0.7152 * parts[1] + 0.0722 * parts[2]
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def icon_ink(qicon) -> float:
    """Mean lightness of an icon's drawn pixels."""
    image = qicon.pixmap(24, 24).toImage()
    values = [QColor.fromRgba(image.pixel(x, y)) for x in range(24) for y in range(24)]
    drawn = [c.lightnessF() for c in values if c.alpha() > 200]
    return sum(drawn) / len(drawn)


def test_a_runtime_switch_recolours_plot_titles_and_icons_with_readable_contrast(qtbot, make_window):
    window = make_window()
    try:
        for theme in ("dark", "light", "dark"):
            window.menus.theme_actions[theme].trigger()
            plots = [window.gradients.histogram.plotItem, window.gradients.heatmap.plotItem,
                     window.curves.loss_plot]
            for plot, view in zip(plots, (window.gradients.histogram, window.gradients.heatmap,
                                          window.curves.plots), strict=True):
                background = view.backgroundBrush().color()
                title = QColor(plot.titleLabel.opts["color"]) if plot.titleLabel.opts.get("color") \
                    else None
                if title is not None and plot.titleLabel.text:
                    assert contrast(title, background) >= 4.5, (theme, plot.titleLabel.text)
                axis = plot.getAxis("left")
                assert contrast(axis.textPen().color(), background) >= 4.5
            fit = window.graph_panel.fit_action.icon()
            ink = icon_ink(fit)
            assert (ink > 0.6) if theme == "dark" else (ink < 0.4), (theme, ink)  # never dim
    finally:
        window.set_theme("system")


def test_the_minimap_follows_a_runtime_theme_switch(qtbot, make_window):
    """The graph's overview was painted on a fixed white: a bright box in the dark theme."""
    from tests.gui_helpers import open_model

    window = make_window()
    window.resize(1024, 700)
    open_model(qtbot, window, "example:digits")
    view = window.graph_panel.view
    view.zoom(4.0)
    qtbot.waitUntil(view.minimap.isVisible, timeout=30_000)

    def background() -> float:  # the map's median lightness: its dots are few
        image = view.minimap.grab().toImage()
        values = sorted(QColor(image.pixel(x, y)).lightnessF()
                        for x in range(4, image.width() - 4, 5) for y in range(4, image.height() - 4, 5))
        return values[len(values) // 2]

    try:
        window.set_theme("dark")
        assert background() < 0.3
        window.set_theme("light")
        assert background() > 0.8
    finally:
        window.set_theme("system")


def option_of(box):
    from PySide6.QtWidgets import QStyleOptionButton

    option = QStyleOptionButton()
    box.initStyleOption(option)
    return option


def indicator_contrast(box) -> float:
    """The most a check box's indicator stands out from the background beside it (WCAG ratio
    of its most contrasting pixel)."""
    rect = box.style().subElementRect(QStyle.SE_CheckBoxIndicator, option_of(box), box)
    image = box.grab().toImage()
    background = QColor(image.pixel(image.width() - 1, 0))  # a corner: no text, no box
    return max(contrast(QColor(image.pixel(x, y)), background)
               for x in range(rect.left(), rect.right() + 1) for y in range(rect.top(), rect.bottom() + 1))


def test_dark_check_boxes_are_visible_after_a_runtime_switch(qtbot, make_window):
    """Fusion outlined a check box in the dark window's colour darkened: 'log y', 'smooth',
    'subtree' showed a label beside nothing (1.1:1)."""
    window = make_window()
    window.resize(1024, 700)
    boxes = [window.curves.log_box, window.curves.smooth_box, window.gradients.log_box]
    try:
        for theme in ("light", "dark"):
            window.set_theme(theme)
            for box in boxes:
                qtbot.waitUntil(box.isVisible, timeout=30_000)
                contents = box.style().subElementRect(QStyle.SE_CheckBoxContents, option_of(box), box)
                label_end = contents.left() + box.fontMetrics().horizontalAdvance(box.text())
                assert box.width() - label_end >= 4, (theme, box.text())  # "log y☐ smooth" read as one
                for checked in (False, True):
                    box.setChecked(checked)
                    assert indicator_contrast(box) >= 3.0, (theme, box.text(), checked)  # WCAG 1.4.11
                box.setChecked(False)
    finally:
        window.set_theme("system")
