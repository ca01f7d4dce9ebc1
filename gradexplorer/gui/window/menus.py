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


class WindowMenus:
    """The menu bar's File, Run, View and Help menus, and the entries other parts look up or add
    to (``MainWindow.menus``, made in its ``__init__``)."""

    def __init__(self, window: QMainWindow) -> None:
        self.window = window
        bar = window.menuBar()
        self.file_menu = bar.addMenu("&File")
        self.file_menu.addAction(make_action(window, "Open model…", "open", "Ctrl+O",
                                             window.open_model_dialog))
        self.reset_action = make_action(window, "Reset model", "step", None, window.reset_model)
        self.reset_action.setToolTip("open the same model again: fresh weights (same seed), step 0, "
                                     "no hooks, empty plots")
        self.file_menu.addAction(self.reset_action)
        self.recent_models_menu, self.recent_snapshots_menu = add_recent_menus(window, self.file_menu)
        self.file_menu.addSeparator()
        window.file_actions.add_to(self.file_menu)
        self.file_menu.addSeparator()
        quit_keys = QKeySequence(QKeySequence.Quit).toString() or "Ctrl+Q"
        self.file_menu.addAction(make_action(window, "Quit", "stop", quit_keys, window.close))
        run_menu = bar.addMenu("&Run")
        rc = window.run_controls
        for action in (rc.step_action, rc.run_n_action, rc.run_action, rc.stop_action):
            run_menu.addAction(action)
        run_menu.addSeparator()
        ab = run_menu.addAction("A/B of a hook…", lambda: window.hook_actions.open_ab())
        ab.setToolTip("train two copies in lockstep, one with a hook; plot both losses and their divergence")
        self.view_menu = bar.addMenu("&View")
        for dock in window.findChildren(type(window.model_dock)):
            self.view_menu.addAction(dock.toggleViewAction())
        self.view_menu.addSeparator()
        self.reset_layout_action = self.view_menu.addAction("Reset layout", window.reset_layout)
        self.reset_layout_action.setToolTip("every panel shown, docked and sized as at the first start")
        self.theme_actions: dict[str, QAction] = {}  # View → Theme
        self._add_theme_menu()
        help_menu = bar.addMenu("&Help")
        help_menu.addAction("Keyboard shortcuts", lambda: QMessageBox.information(
            window, "Keyboard shortcuts", SHORTCUTS_HELP))
        help_menu.addAction("About gradexplorer", lambda: AboutDialog(window).exec())

    def _add_theme_menu(self) -> None:
        """View → Theme: follow the system, light or dark; remembered, applied at once."""
        window = self.window
        menu = self.view_menu.addMenu("Theme")
        group = QActionGroup(window)
        chosen = window.settings.theme()
        for name in THEMES:
            action = QAction("Follow the system" if name == "system" else name.capitalize(), window,
                             checkable=True, checked=name == chosen)
            action.triggered.connect(lambda _on, name=name: window.set_theme(name))
            group.addAction(action)
            menu.addAction(action)
            self.theme_actions[name] = action

    def check_theme(self, theme: str) -> None:
        """Tick ``theme`` in View → Theme."""
        if theme in self.theme_actions:
            self.theme_actions[theme].setChecked(True)

    def add_file_action(self, action: QAction, after: QAction | None) -> None:
        """Put ``action`` in the File menu right after ``after`` (at the end without it)."""
        actions = self.file_menu.actions()
        at = actions.index(after) + 1 if after in actions else len(actions)
        self.file_menu.insertAction(actions[at] if at < len(actions) else None, action)

    def file_action_named(self, prefix: str) -> QAction | None:
        """The File menu's entry whose text starts with ``prefix``."""
        return next((a for a in self.file_menu.actions() if a.text().startswith(prefix)), None)

    def add_view_action(self, action: QAction, first: bool = False) -> None:
        """Put ``action`` in the View menu: first, or with the docks (before "Reset layout")."""
        actions = self.view_menu.actions()
        before = actions[0] if first else next((a for a in actions if a.isSeparator()), None)
        self.view_menu.insertAction(before, action)
