"""Nothing moves under the pointer: a hover readout has its own place, so hovering a curve
leaves every dock's size as it was (the readout asked for its text's width: the Training dock
grew and the Model dock beside it shrank from ~290 to ~175 pixels, and a click on a spike marker
missed because the plot had moved)."""

from __future__ import annotations

from PySide6.QtCore import QPoint
from PySide6.QtWidgets import QDockWidget

from tests.gui_helpers import TIMEOUT_MS, open_model, wait_idle


def dock_sizes(window) -> dict[str, tuple[int, int]]:
    return {d.objectName(): (d.width(), d.height()) for d in window.findChildren(QDockWidget)
            if d.isVisible()}


def test_hovering_a_curve_leaves_every_dock_as_it_was(qtbot, make_window):
    window = make_window()
    window.resize(1024, 700)
    open_model(qtbot, window, "example:digits")
    window.controller.run(12)
    qtbot.waitUntil(lambda: window.controller.live.session.step_count == 12, timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    curves = window.curves
    qtbot.wait(200)
    before = dock_sizes(window)
    view = curves.plots
    for plot in (curves.loss_plot, curves.norm_plot):
        rect = plot.vb.sceneBoundingRect()
        for fraction in (0.2, 0.5, 0.9):  # the readout's text grows and shrinks as steps differ
            scene = rect.topLeft() + (rect.bottomRight() - rect.topLeft()) * fraction
            at = view.mapFromScene(scene)
            qtbot.mouseMove(view.viewport(), QPoint(at.x(), at.y()))
            qtbot.waitUntil(lambda: "step" in curves.readout.text(), timeout=5_000)
            curves.readout.setText(curves.readout.text() + " · a long readout " * 8)  # longer still
            qtbot.wait(60)
            assert dock_sizes(window) == before, curves.readout.text()
