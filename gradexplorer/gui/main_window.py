"""The main window: composes the docks and toolbars; each part observes the controller."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QDockWidget, QLabel, QMainWindow, QSplitter, QWidget

from gradexplorer.gui.controller import SessionController
from gradexplorer.gui.curves import TrainingCurves
from gradexplorer.gui.errors import show_error
from gradexplorer.gui.menus import build_menus
from gradexplorer.gui.module_tree import ModuleTree
from gradexplorer.gui.open_model_dialog import ask_model
from gradexplorer.gui.parameter_table import ParameterTable
from gradexplorer.gui.run_controls import RunControls
from gradexplorer.gui.selection import SelectionModel
from gradexplorer.gui.settings import AppSettings
from gradexplorer.gui.status_bar import RunStatusBar


class MainWindow(QMainWindow):
    """gradexplorer's window. It wires parts together; the parts do the work."""

    def __init__(self, settings: AppSettings | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("gradexplorer")
        self.settings = settings or AppSettings()
        self.controller = SessionController(self)
        self.selection = SelectionModel(self)
        self.tree = ModuleTree(self.selection)
        self.table = ParameterTable(self.selection)
        self.curves = TrainingCurves(self.controller.timeline)
        self.run_controls = RunControls(self.controller, self)
        self.addToolBar(self.run_controls)
        self.setStatusBar(RunStatusBar(self.controller, self))
        self.setCentralWidget(self._central())
        self._docks()
        build_menus(self)
        self._connect()
        self._restore()

    def _central(self) -> QWidget:
        label = QLabel("The backward graph appears here.")
        label.setAlignment(Qt.AlignCenter)
        return label

    def _dock(self, title: str, widget: QWidget, area: Qt.DockWidgetArea) -> QDockWidget:
        dock = QDockWidget(title, self)
        dock.setObjectName(title.lower().replace(" ", "_"))
        dock.setWidget(widget)
        self.addDockWidget(area, dock)
        return dock

    def _docks(self) -> None:
        model_split = QSplitter(Qt.Vertical)
        model_split.addWidget(self.tree)
        model_split.addWidget(self.table)
        model_split.setSizes([300, 300])
        self.model_dock = self._dock("Model", model_split, Qt.LeftDockWidgetArea)
        self.curves_dock = self._dock("Training", self.curves, Qt.BottomDockWidgetArea)

    def _connect(self) -> None:
        c = self.controller
        c.session_opened.connect(self._session_opened)
        c.updated.connect(self._updated)
        c.hooks_changed.connect(self.tree.set_hooks)
        c.error.connect(lambda text: show_error(self, text))

    def _session_opened(self, live) -> None:
        self.setWindowTitle(f"gradexplorer — {live.spec}")
        self.tree.set_model(live.session.model)
        self.table.table.set_model(live.session.model)
        self.curves.refresh()
        self.settings.set_last_model(live.spec)

    def _updated(self, update) -> None:
        self.curves.refresh(update)
        latest = self.controller.timeline.latest_gradients
        if latest is not None:
            self.table.table.set_stats(latest.params)

    def open_model_dialog(self) -> None:
        """Ask for a model and open it."""
        current = self.controller.live.spec if self.controller.live else ""
        chosen = ask_model(self, current)
        if chosen is not None:
            self.controller.open_model(*chosen)

    def busy(self) -> bool:
        """Whether work is still under way (a run, a load, a graph layout)."""
        return self.controller.state != "idle"

    def _restore(self) -> None:
        self.resize(1400, 900)
        geometry, state = self.settings.geometry(), self.settings.window_state()
        if geometry is not None:
            self.restoreGeometry(geometry)
        if state is not None:
            self.restoreState(state)

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt API
        """Remember the layout, stop the worker and wait for it."""
        self.settings.save_window(self.saveGeometry(), self.saveState())
        self.controller.close()
        super().closeEvent(event)
