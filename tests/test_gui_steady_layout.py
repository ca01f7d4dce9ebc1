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


def laid_out(qtbot, window) -> None:
    """The window as a person sees it: settled and laid out (the docks' shares applied, their
    sizes the same 250 ms apart)."""
    sizes = None
    for _ in range(12):
        window.settle()
        qtbot.wait(250)
        if dock_sizes(window) == sizes:
            return
        sizes = dock_sizes(window)


def test_the_ledger_reads_at_1024x700(qtbot, make_window, tmp_path):
    """Its explanation was cut, its figures needed both scroll bars and its plot was ~60 pixels
    wide; showing it changed no side dock's width."""
    from gradexplorer.gui.panels.ledger_figures import WIDEST
    from tests.watched_loop import clipped_run

    clipped_run(tmp_path / "run")
    window = make_window()
    window.resize(1024, 700)
    assert window.file_actions.open_run(str(tmp_path / "run")) is not None
    laid_out(qtbot, window)
    before = {name: width for name, (width, _h) in dock_sizes(window).items()
              if name in ("model", "gradients")}
    forensics = window.forensics
    forensics.bring_forward(forensics.ledger_dock)
    laid_out(qtbot, window)
    panel = forensics.ledger_panel
    assert {name: width for name, (width, _h) in dock_sizes(window).items() if name in before} == before
    area = panel.details_area
    assert not area.horizontalScrollBar().isVisible() and area.horizontalScrollBar().maximum() == 0
    text = panel.details.text()
    assert "global norm as accumulated: " in text and "clip coef: " in text and "(clipped)" in text
    shown = [(name, value) for name, value in panel.details.cells if value.isVisible()]
    assert len(shown) == len(text.splitlines()) >= 10
    viewport = area.viewport().rect()
    for name, value in shown:  # every figure within the area's width, no word of it cut
        box = value.geometry()
        assert box.right() <= viewport.right()
        assert value.width() >= value.fontMetrics().horizontalAdvance(WIDEST)
        for word in value.text().split():
            assert value.fontMetrics().horizontalAdvance(word) <= value.width(), (word, value.width())
        if name.isVisible():
            assert name.fontMetrics().horizontalAdvance(name.text()) <= name.width()
            assert name.toolTip()  # the figure's meaning one hover away
    heading = panel.heading
    assert heading.height() < 2 * heading.fontMetrics().height()  # one line ...
    assert heading.shown() == heading.text()  # ... read whole at 1024×700
    assert "every figure in the app" in heading.toolTip()
    assert panel.plot.width() >= 180 and panel.plot.height() >= 80
    assert panel.legend.height() < 2 * panel.legend.fontMetrics().height()  # one line of key
    assert panel.details.columns == 1
    window.resize(1600, 1000)  # a wide Ledger: the figures in two pairs of columns, no scrolling
    laid_out(qtbot, window)
    assert panel.details.columns == 2 and panel.details.text() == text
    assert area.verticalScrollBar().maximum() == 0 and area.horizontalScrollBar().maximum() == 0
    assert panel.plot.width() >= 300


def test_a_spike_click_and_a_hover_leave_every_dock_as_it_was(qtbot, make_window, tmp_path):
    """At 1024×700 a click on a spike marker widened the Gradients dock from 286 to 371 pixels
    (the Distributions tab beside it asked for the width of "6 of 6 · step 50 of 60")."""
    from tests.spike_helpers import train
    from tests.test_gui_step_forensics import click_marker

    train(tmp_path / "run", 60, inject=50)
    window = make_window()
    window.resize(1024, 700)
    assert window.file_actions.open_run(str(tmp_path / "run")) is not None
    qtbot.waitUntil(lambda: window.graph_panel.drawing is not None, timeout=TIMEOUT_MS)
    window.forensics.spike_markers.refresh()
    laid_out(qtbot, window)
    widths = {name: width for name, (width, _h) in dock_sizes(window).items()
              if name in ("model", "gradients", "distributions")}
    assert len(widths) == 3
    click_marker(qtbot, window, window.curves.norm_plot, 50)
    qtbot.waitUntil(lambda: window.forensics.spike_panel.shown is not None, timeout=TIMEOUT_MS)
    laid_out(qtbot, window)
    count = window.distributions.grid.count
    assert "step 50 of 60" in count.text()  # the step said, cut where there is no room for it
    now = {name: width for name, (width, _h) in dock_sizes(window).items() if name in widths}
    assert now == widths
    window.curves_dock.raise_()  # the Training tab, behind the Spikes tab the click raised
    laid_out(qtbot, window)
    assert {name: width for name, (width, _h) in dock_sizes(window).items() if name in widths} == widths
    curves = window.curves
    rect = curves.loss_plot.vb.sceneBoundingRect()
    at = curves.plots.mapFromScene(rect.center())
    qtbot.mouseMove(curves.plots.viewport(), QPoint(at.x(), at.y()))
    qtbot.waitUntil(lambda: "step" in curves.readout.text(), timeout=5_000)
    laid_out(qtbot, window)
    assert {name: width for name, (width, _h) in dock_sizes(window).items() if name in widths} == widths


def inside(view, item) -> bool:
    """Whether ``item`` (a graphics item of ``view``'s scene) lies within the view's width."""
    box = view.mapFromScene(item.sceneBoundingRect()).boundingRect()
    return box.left() >= 0 and box.right() <= view.viewport().width()


@pytest.mark.parametrize("sizes", [((1600, 1000), (1024, 700)), ((1024, 700), (1600, 1000))])
def test_the_heat_map_and_its_colour_bar_stay_inside_the_dock(qtbot, make_window, request, sizes):
    """A plot's title kept the width of the window it was set in (pyqtgraph re-sets a title's
    least width at every resize and recolouring): at 1024×700 the heat map and its colour bar ran
    past the dock's right edge, after a theme switch too; the hover readout ran under the bar."""
    from PySide6.QtWidgets import QApplication

    from gradexplorer.gui.theme import apply_theme, current_theme

    runs = request.getfixturevalue("three_runs")
    window = make_window()
    window.resize(*sizes[0])
    assert window.file_actions.open_run(str(runs[1])) is not None
    window.selection.select(param="2.weight", module="2", source="test")
    laid_out(qtbot, window)
    app, first = QApplication.instance(), current_theme()
    try:
        for size, theme in zip(sizes, ("dark", "light"), strict=True):
            window.resize(*size)
            laid_out(qtbot, window)
            apply_theme(app, theme)  # a runtime switch: every title and axis re-set
            laid_out(qtbot, window)
            gradients = window.gradients
            heatmap = gradients.heatmap
            assert heatmap.width() <= gradients.scroll.viewport().width()
            for plot in (gradients.histogram, heatmap):
                assert plot.plotItem.sceneBoundingRect().width() <= plot.viewport().width(), size
            bar = heatmap.colour_bar
            assert inside(heatmap, bar) and inside(heatmap, bar.axis), size
            vb = heatmap.plotItem.vb.sceneBoundingRect()
            at = heatmap.mapFromScene(vb.center())
            readout = heatmap.readout
            heatmap.show_readout("")
            qtbot.mouseMove(heatmap.viewport(), QPoint(at.x(), at.y()))
            qtbot.waitUntil(lambda r=readout: "values" in r.toPlainText(), timeout=5_000)
            box = readout.sceneBoundingRect()  # wrapped within the image, never under the bar
            assert vb.left() - 1 <= box.left() and box.right() <= vb.right() + 1, size
            qtbot.mouseMove(heatmap.viewport(), QPoint(0, 0))
    finally:
        apply_theme(app, first)
