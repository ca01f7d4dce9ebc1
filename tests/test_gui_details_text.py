"""The details pane reads in both themes: its labels' grey and its alarm red had 2.4:1 and
3.5:1 on the dark pane (WCAG asks 4.5:1 for text), and "zeros 0.4219" read as a count."""

from __future__ import annotations

import re

from PySide6.QtGui import QColor

from tests.gui_helpers import TIMEOUT_MS, open_model, wait_idle
from tests.test_gui_theme import contrast


def test_details_text_contrast_after_each_runtime_switch(qtbot, make_window):
    window = make_window()
    window.resize(1024, 700)
    open_model(qtbot, window, "example:digits")
    window.controller.step()
    qtbot.waitUntil(lambda: window.controller.timeline.latest_gradients is not None, timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    window.selection.select(param="fc2.weight", module="fc2", source="test")
    pane = window.details
    fraction = window.controller.timeline.latest_gradients.params["fc2.weight"].zero_fraction
    try:
        for theme in ("dark", "light", "dark"):
            window.set_theme(theme)
            html = pane.toHtml()
            text = pane.toPlainText()
            assert re.search(rf"zeros\s+{fraction * 100:.4g} %", text), text
            image = pane.viewport().grab().toImage()
            background = QColor(image.pixel(image.width() - 2, image.height() - 2))
            colours = set(re.findall(r"color:\s*(#[0-9a-fA-F]{6})", html))
            assert colours  # the labels are coloured
            for colour in colours:
                assert contrast(QColor(colour), background) >= 4.5, (theme, colour, background.name())
    finally:
        window.set_theme("system")
