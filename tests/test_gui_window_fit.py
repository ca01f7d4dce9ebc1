"""The main window fits the screen it opens on: first size, clamped restore, 800×600, toolbar
overflow, docks that recover after the window shrank, View → Reset layout."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QToolButton

from gradexplorer.gui.window import window_fit
from gradexplorer.gui.window.window_fit import SCREEN_SHARE, available
from tests.gui_helpers import TIMEOUT_MS


@pytest.fixture
def real_screen(monkeypatch):
    """Treat the offscreen platform's 800×800 screen as a real one (a small laptop's)."""
    monkeypatch.setattr(window_fit, "screen_is_real", lambda: True)


def share_of(window, dock, orient=Qt.Horizontal) -> float:
    whole = window.width() if orient == Qt.Horizontal else window.height()
    return (dock.width() if orient == Qt.Horizontal else dock.height()) / whole


def test_first_window_is_at_most_ninety_percent_of_the_screen(make_window, real_screen):
    window = make_window()
    screen = available(window)
    assert window.width() <= screen.width() * SCREEN_SHARE + 1
    assert window.height() <= screen.height() * SCREEN_SHARE + 1
    assert screen.contains(window.frameGeometry())


def test_geometry_saved_on_a_bigger_screen_is_clamped(make_window, qtbot, real_screen):
    first = make_window()
    first.resize(2600, 1500)  # a 4K monitor's window
    first.move(900, 700)
    qtbot.waitUntil(lambda: first.width() == 2600, timeout=TIMEOUT_MS)
    first.close()
    second = make_window()
    screen = available(second)
    assert screen.contains(second.frameGeometry()), (second.frameGeometry(), screen)


def test_window_fits_800_by_600_with_every_panel_and_the_toolbar_overflows(make_window, qtbot):
    window = make_window()
    hint = window.minimumSizeHint()
    assert hint.width() <= 800 and hint.height() <= 600, hint
    window.resize(800, 600)
    qtbot.waitUntil(lambda: window.size().toTuple() == (800, 600), timeout=TIMEOUT_MS)
    for dock in (window.model_dock, window.gradients_dock, window.curves_dock):
        assert dock.isVisible() and dock.width() > 100 and dock.height() > 100, dock.objectName()
    assert window.graph_panel.view.width() > 200
    extension = window.run_controls.findChild(QToolButton, "qt_toolbar_ext_button")
    assert extension is not None and extension.isVisible()  # "»": the rest of the toolbar
    assert not extension.icon().isNull() and not window.run_controls.every_spin.isVisible()


def test_plots_get_eighty_pixels_even_in_a_short_window(make_window, qtbot):
    window = make_window()
    window.resize(1024, 700)
    qtbot.waitUntil(lambda: window.size().toTuple() == (1024, 700), timeout=TIMEOUT_MS)
    gradients = window.gradients
    for plot in (gradients.histogram.getPlotItem(), gradients.heatmap.getPlotItem(),
                 window.curves.loss_plot, window.curves.norm_plot):
        qtbot.waitUntil(lambda plot=plot: plot.vb.height() >= 80, timeout=TIMEOUT_MS)
    assert gradients.flow_panel.chart.visible_rows >= 5


def test_squeezed_docks_recover_when_the_window_grows(make_window, qtbot):
    window = make_window()
    window.resize(800, 600)
    qtbot.waitUntil(lambda: window.width() == 800, timeout=TIMEOUT_MS)
    window.resizeDocks([window.model_dock], [120], Qt.Horizontal)  # as a small window leaves it
    window.resize(1500, 920)
    qtbot.waitUntil(lambda: share_of(window, window.model_dock) > 0.2, timeout=TIMEOUT_MS)
    assert share_of(window, window.gradients_dock) > 0.2
    assert share_of(window, window.curves_dock, Qt.Vertical) > 0.15


def test_a_squeezed_saved_layout_recovers_on_the_next_start(make_window, qtbot):
    first = make_window()
    # a size the offscreen screen (800×800) holds: restoreGeometry clamps a bigger saved window
    # to it (1500×920 came back 798×774, where the docks' 1500-wide shares cannot all fit)
    first.resize(780, 700)
    qtbot.waitUntil(lambda: first.size().toTuple() == (780, 700), timeout=TIMEOUT_MS)
    first.dock_shares.reset()  # the shares a window of this size starts with
    qtbot.wait(4 * window_fit.RECOVER_MS)  # (its layout applied)
    fresh = {d: share_of(first, getattr(first, d)) for d in ("model_dock", "gradients_dock")}
    first.resizeDocks([first.model_dock, first.gradients_dock], [60, 60], Qt.Horizontal)
    qtbot.waitUntil(lambda: share_of(first, first.model_dock) < 0.6 * fresh["model_dock"], timeout=TIMEOUT_MS)
    first.close()
    second = make_window()  # the squeezed layout was saved: it recovers on opening
    assert second.size().toTuple() == (780, 700)  # restored as saved, so the shares compare
    for dock in fresh:  # no dock left well under its share (window_fit.RECOVER_BELOW)
        qtbot.waitUntil(lambda d=dock: share_of(second, getattr(second, d))
                        >= window_fit.RECOVER_BELOW * fresh[d], timeout=TIMEOUT_MS)


def test_reset_layout_docks_and_shows_every_panel(make_window, qtbot):
    window = make_window()
    window.gradients_dock.setFloating(True)
    window.model_dock.hide()
    window.curves_dock.hide()
    window.menus.reset_layout_action.trigger()
    qtbot.waitUntil(lambda: window.model_dock.isVisible() and window.curves_dock.isVisible(),
                    timeout=TIMEOUT_MS)
    assert not window.gradients_dock.isFloating()
    assert window.dockWidgetArea(window.gradients_dock) == Qt.RightDockWidgetArea
    qtbot.waitUntil(lambda: share_of(window, window.model_dock) > 0.2, timeout=TIMEOUT_MS)

