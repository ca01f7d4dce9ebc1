"""The menu bar: file, run and view commands with their keyboard shortcuts."""

from __future__ import annotations

from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QMainWindow, QMessageBox

from gradexplorer.gui.dialogs.about_dialog import AboutDialog
from gradexplorer.gui.theme import THEMES
from gradexplorer.gui.window.recent_menus import add_recent_menus
from gradexplorer.gui.window.run_controls import make_action

SHORTCUTS_HELP = """<table>
<tr><td><b>Ctrl+O</b></td><td>open a model</td></tr>
<tr><td><b>F6</b></td><td>one step</td></tr>
<tr><td><b>F7</b></td><td>run N steps</td></tr>
<tr><td><b>F5</b></td><td>run / pause / resume</td></tr>
<tr><td><b>Shift+F5</b></td><td>stop</td></tr>
<tr><td><b>Ctrl+F</b></td><td>find in the graph</td></tr>
<tr><td><b>Ctrl+0</b> / <b>Ctrl+1</b></td><td>zoom to fit / to the selection</td></tr>
<tr><td><b>Ctrl+E</b></td><td>export a gradient snapshot</td></tr>
<tr><td><b>Ctrl+Shift+O</b></td><td>open a snapshot</td></tr>
<tr><td><b>Ctrl+Shift+R</b></td><td>open a run written by gradexplorer.watch and follow it</td></tr>
<tr><td><b>Ctrl+S</b></td><td>save the graph as PNG or SVG</td></tr>
<tr><td><b>H</b></td><td>hook menu for the selected module</td></tr>
<tr><td>right-click a module</td><td>attach or detach a hook</td></tr>
</table>"""


def add_theme_menu(window: QMainWindow) -> None:
    """View → Theme: follow the system, light or dark; remembered, applied at once."""
    menu = window.view_menu.addMenu("Theme")
    group = QActionGroup(window)
    chosen = window.settings.theme()
    for name in THEMES:
        action = QAction("Follow the system" if name == "system" else name.capitalize(), window,
                         checkable=True, checked=name == chosen)
        action.triggered.connect(lambda _on, name=name: window.set_theme(name))
        group.addAction(action)
        menu.addAction(action)
        window.theme_actions[name] = action


def build_menus(window: QMainWindow) -> None:
    """Add the File, Run, View and Help menus to ``window``."""
    bar = window.menuBar()
    file_menu = bar.addMenu("&File")
    file_menu.addAction(make_action(window, "Open model…", "open", "Ctrl+O",
                                    window.open_model_dialog))
    window.reset_action = make_action(window, "Reset model", "step", None, window.reset_model)
    window.reset_action.setToolTip("open the same model again: fresh weights (same seed), step 0, "
                                   "no hooks, empty plots")
    file_menu.addAction(window.reset_action)
    add_recent_menus(window, file_menu)
    window.file_menu = file_menu
    file_menu.addSeparator()
    window.file_actions.add_to(file_menu)
    file_menu.addSeparator()
    quit_keys = QKeySequence(QKeySequence.Quit).toString() or "Ctrl+Q"
    file_menu.addAction(make_action(window, "Quit", "stop", quit_keys, window.close))
    run_menu = bar.addMenu("&Run")
    rc = window.run_controls
    for action in (rc.step_action, rc.run_n_action, rc.run_action, rc.stop_action):
        run_menu.addAction(action)
    run_menu.addSeparator()
    ab = run_menu.addAction("A/B of a hook…", lambda: window.hook_actions.open_ab())
    ab.setToolTip("train two copies in lockstep, one with a hook; plot both losses and their divergence")
    window.view_menu = bar.addMenu("&View")
    for dock in window.findChildren(type(window.model_dock)):
        window.view_menu.addAction(dock.toggleViewAction())
    window.view_menu.addSeparator()
    reset = window.view_menu.addAction("Reset layout", window.reset_layout)
    reset.setToolTip("every panel shown, docked and sized as at the first start")
    window.reset_layout_action = reset
    add_theme_menu(window)
    help_menu = bar.addMenu("&Help")
    help_menu.addAction("Keyboard shortcuts", lambda: QMessageBox.information(
        window, "Keyboard shortcuts", SHORTCUTS_HELP))
    help_menu.addAction("About gradexplorer", lambda: AboutDialog(window).exec())
