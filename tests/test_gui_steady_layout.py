"""Nothing moves under the pointer: a hover readout has its own place, so hovering a curve
leaves every dock's size as it was (the readout asked for its text's width: the Training dock
grew and the Model dock beside it shrank from ~290 to ~175 pixels, and a click on a spike marker
missed because the plot had moved)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, QRect
from PySide6.QtWidgets import QDockWidget

from tests.gui_helpers import TIMEOUT_MS, open_model, wait_idle
from tests.test_gui_run_overlay import three_runs  # noqa: F401 - the fixture


def dock_sizes(window) -> dict[str, tuple[int, int]]:
    return {d.objectName(): (d.width(), d.height()) for d in window.findChildren(QDockWidget)
            if d.isVisible()}


def test_hovering_a_curve_leaves_every_dock_as_it_was(qtbot, make_window):
    window = make_window()
    window.resize(1024, 700)
    open_model(qtbot, window, "example:digits")
    window.controller.run(12)
    qtbot.waitUntil(lambda: window.controller.session.live.session.step_count == 12, timeout=TIMEOUT_MS)
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


def global_rect(widget_or_item, view=None) -> QRect:
    """A widget's, or a graphics item's in ``view`` (as much as the view shows), rectangle on
    the screen."""
    if view is None:
        return QRect(widget_or_item.mapToGlobal(QPoint(0, 0)), widget_or_item.size())
    box = view.mapFromScene(widget_or_item.sceneBoundingRect()).boundingRect()
    box = box.intersected(view.viewport().rect())
    return QRect(view.viewport().mapToGlobal(box.topLeft()), box.size())


def keys_and_data(window):
    """The rectangles of every legend on show and of every plot's data area on show."""
    import pyqtgraph as pg

    from gradexplorer.gui.plots.legend_row import LegendRow

    keys = [(global_rect(k), k) for k in window.findChildren(LegendRow) if k.isVisible()]
    data = []
    for view in window.findChildren(pg.GraphicsView):
        if not view.isVisible() or view.scene() is None:
            continue
        for item in view.scene().items():
            if isinstance(item, pg.LegendItem) and item.isVisible():
                keys.append((global_rect(item, view), view))
            elif isinstance(item, pg.ViewBox) and item.isVisible():
                data.append((global_rect(item, view), view))
    return keys, data


@pytest.mark.parametrize("size", [(1024, 700), (1600, 1000)])
def test_no_legend_covers_a_plot_and_no_plot_is_squeezed(make_window, request, size):
    runs = request.getfixturevalue("three_runs")
    window = make_window()
    window.resize(*size)
    assert window.file_actions.open_run(str(runs[0])) is not None
    for path in runs[1:]:
        assert window.run_compare.add_run(path) is not None
    window.selection.select(param="0.weight", module="0", source="test")
    window.settle()
    window.curves.refresh()
    window.run_compare.runs_panel.refresh()
    window.settle()
    assert window.curves.loss_lines.names() == ["a", "b", "c"]
    keys, data = keys_and_data(window)
    assert len(keys) >= 3  # loss, norm and the Runs dock's figure
    for key, holder in keys:
        for box, view in data:
            assert not key.intersects(box), (key, holder, box, view.parent())
    runs_plot = window.run_compare.runs_panel.plot
    assert runs_plot.isVisible()  # just added: the Runs dock on show (a tab in a short window)
    assert runs_plot.plotItem.vb.height() >= 40  # a readable plot, not squeezed to nothing


def test_the_ledger_reads_at_1024x700(make_window, request):
    """Its explanation was cut and its plot ~60 pixels wide beside 240 of details."""
    runs = request.getfixturevalue("three_runs")
    window = make_window()
    window.resize(1024, 700)
    assert window.file_actions.open_run(str(runs[1])) is not None
    ledger = window.forensics
    ledger.ledger_dock.show()
    ledger.ledger_dock.raise_()
    window.settle()
    panel = ledger.ledger_panel
    assert panel.plot.width() >= 120
    heading = panel.heading
    assert heading.height() >= heading.heightForWidth(heading.width())  # every word of it shown
