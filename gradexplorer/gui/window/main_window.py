"""The main window: composes the docks and toolbars; each part observes the controller."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QApplication, QDockWidget, QMainWindow, QSplitter, QWidget

from gradexplorer.gui.errors import show_error
from gradexplorer.gui.graph.panel import GraphPanel
from gradexplorer.gui.hooks.hook_menu import HookActions
from gradexplorer.gui.models.observers import disconnect_observers
from gradexplorer.gui.models.selection import SelectionModel
from gradexplorer.gui.models.session import GraphTraced
from gradexplorer.gui.models.shown_run import ShownRun
from gradexplorer.gui.panels.details_pane import DetailsPane
from gradexplorer.gui.panels.event_log import EventLog
from gradexplorer.gui.panels.model_filter import ModelFilterBar
from gradexplorer.gui.panels.module_tree import ModuleTree
from gradexplorer.gui.panels.parameter_table import ParameterTable, run_snr
from gradexplorer.gui.session.controller import IDLE, LOADING, SessionController
from gradexplorer.gui.settings import AppSettings
from gradexplorer.gui.theme import apply_theme
from gradexplorer.gui.throttle import throttled
from gradexplorer.gui.window.file_actions import FileActions
from gradexplorer.gui.window.first_view import AfterFirstPaint, leave_start, plots_soon, traced
from gradexplorer.gui.window.menus import WindowMenus
from gradexplorer.gui.window.run_controls import RunControls
from gradexplorer.gui.window.shortcuts import WindowShortcutsFirst
from gradexplorer.gui.window.status_bar import RunStatusBar, trace_notes
from gradexplorer.gui.window.step_follow import StepFollow
from gradexplorer.gui.window.window_fit import DockShares, clamp_to_screen, first_size

if TYPE_CHECKING:
    from gradexplorer.gui.window.plot_views import PlotViews

TABLES_MS = 130  # the parameter table and details pane: about 8 times a second
TINT_MS = 250  # the graph's gradient tint (recolours up to ~12k nodes): 4 times a second
# both on their own timers (no leading-edge call), apart from the plots' periods


class MainWindow(QMainWindow):
    """gradexplorer's window. It wires parts together; the parts do the work."""

    def __init__(self, settings: AppSettings | None = None, parent: QWidget | None = None,
                 plots_later: bool = False) -> None:
        super().__init__(parent)
        self.setWindowTitle("gradexplorer")
        self.scripted = False  # True while --steps/--screenshot drive the window: no dialogs
        self.exit_status: int | None = None  # the app's exit status a scripted run sets (screenshot.py)
        self.quit_fast = False  # app.launch: closed while the first model opens, the process ends
        self.shown_run = ShownRun()  # the run folder shown instead of the model (run_view.py)
        self._first_view = False  # the graph shown is a model's first view, its session to come
        self._after_first_view = None  # the live session to show once its first view is drawn
        self.settings = settings or AppSettings()
        self.controller = SessionController(self)
        self.selection = SelectionModel()
        self.tree = ModuleTree(self.selection)
        self.table = ParameterTable(self.selection)
        self.model_filter = ModelFilterBar(self.selection, self.tree, self.table)
        self.model_filter.setMaximumHeight(self.model_filter.sizeHint().height())
        self.graph_panel = GraphPanel(self.selection)
        self.details = DetailsPane(self.selection)
        self._plots: PlotViews | None = None  # the plots, ledger, spikes and Runs dock: build_plots
        self.events = EventLog()
        self.run_controls = RunControls(self.controller, self)
        self.file_actions = FileActions(self)
        self.hook_actions = HookActions(self)  # the hook menu, A/B windows
        self._throttles = (
            throttled(self._redraw_parameters, timeout=TABLES_MS, leading=False, parent=self),
            throttled(self._redraw_graph_tint, timeout=TINT_MS, leading=False, parent=self),
            throttled(self._redraw_observed, timeout=TABLES_MS, leading=False, parent=self))
        self.addToolBar(self.run_controls)
        self.status = RunStatusBar(self.controller, self)
        self.setStatusBar(self.status)
        self.setCentralWidget(self.graph_panel)
        self._docks()
        self.menus = WindowMenus(self)  # File, Run, View, Help
        self.startup_clock = None  # bench/gui.py --startup only: time_startup
        self.script = None  # the ScreenshotRun driving the window (--steps/--screenshot): run_script
        if not plots_later:
            self.build_plots()  # with the ledger, spike markers, divergence and the Runs dock
        self.shortcuts_first = WindowShortcutsFirst(self)
        self.step_follow = StepFollow(self)  # every view at the selection's step; End: live
        self._connect()
        self._restore()

    def _dock(self, title: str, widget: QWidget, area: Qt.DockWidgetArea) -> QDockWidget:
        dock = QDockWidget(title, self)
        dock.setObjectName(title.lower().replace(" ", "_"))
        dock.setWidget(widget)
        self.addDockWidget(area, dock)
        return dock

    def _docks(self) -> None:
        model_split = QSplitter(Qt.Vertical)
        model_split.addWidget(self.model_filter)
        for widget in (self.tree, self.table, self.details):
            model_split.addWidget(widget)
        model_split.setSizes([30, 220, 260, 220])
        model_split.setCollapsible(0, False)
        self.model_dock = self._dock("Model", model_split, Qt.LeftDockWidgetArea)
        self.gradients_dock = self._dock("Gradients", plots_soon(), Qt.RightDockWidgetArea)
        self.distributions_dock = self._dock("Distributions", plots_soon(), Qt.RightDockWidgetArea)
        self.tabifyDockWidget(self.gradients_dock, self.distributions_dock)
        self.gradients_dock.raise_()
        self.curves_dock = self._dock("Training", plots_soon(), Qt.BottomDockWidgetArea)
        self.events_dock = self._dock("Events", self.events, Qt.BottomDockWidgetArea)
        self.tabifyDockWidget(self.curves_dock, self.events_dock)
        self.curves_dock.raise_()
        for corner, area in ((Qt.BottomLeftCorner, Qt.LeftDockWidgetArea),
                             (Qt.BottomRightCorner, Qt.RightDockWidgetArea)):
            self.setCorner(corner, area)  # the side docks keep the full height of a short window
        # the graph keeps about half of the window at any size
        self.dock_shares = DockShares(self, [(self.model_dock, Qt.Horizontal, 0.24, 320),
                                             (self.gradients_dock, Qt.Horizontal, 0.28, 220),
                                             (self.curves_dock, Qt.Vertical, 0.22, 190)])

    gradients = property(lambda self: self.build_plots().gradients, doc="The Gradients dock's panel.")
    distributions = property(lambda self: self.build_plots().distributions, doc="The Distributions dock.")
    curves = property(lambda self: self.build_plots().curves, doc="The Training dock's loss/norm curves.")
    overlay = property(lambda self: self.build_plots().overlay, doc="The runs compared (run_compare).")
    forensics = property(lambda self: self.build_plots().forensics,
                         doc="The ledger, spike and optimizer docks (step_forensics.StepForensics).")
    run_compare = property(lambda self: self.build_plots().compare,
                           doc="The Runs dock and File → Add run to compare (run_compare.RunCompare).")

    def _first_graph_shown(self) -> None:
        self.controller.first_view_shown()  # training is set up from now on
        if self.controller.session.state != LOADING:  # (else once it opens: Step enabled first)
            self.build_plots()

    def build_plots(self) -> PlotViews:
        """The plots and the runs overlay (``plot_views.PlotViews``), made now if not yet: the
        app's start makes them once its model is open, Step enabled (pyqtgraph and all: a second)."""
        if self._plots is None:
            from gradexplorer.gui.window.plot_views import make_plot_views

            self._plots = make_plot_views(self)
        return self._plots

    def dock_named(self, name: str) -> QDockWidget | None:
        """A dock by its object name (``curves``: the Training dock), for ``open --dock``."""
        return self.findChild(QDockWidget, "training" if name == "curves" else name)

    def time_startup(self, preloading: bool = False) -> None:
        """Note the first paints for ``bench/gui.py --startup`` (when its variable is set;
        ``preloading``: torch's library is loading on a spare core, noted in its log)."""
        from gradexplorer.gui.window.startup_clock import watch_startup

        self.startup_clock = watch_startup(self, preloading)

    def run_script(self, script) -> None:
        """``script`` (a ScreenshotRun) drives the window: no dialogs; ``end_script`` quits."""
        self.script, self.scripted, self.exit_status = script, True, 0

    def end_process_at_close(self) -> None:
        """The app's window (``app.launch``): closed while its first model opens, the process ends."""
        self.quit_fast = True

    def end_script(self, status: int) -> None:
        self.exit_status = status  # 0: done, 2: failed
        self.close()

    def reset_layout(self) -> None:
        """View → Reset layout: every dock shown, docked and sized as at the first start."""
        self.dock_shares.reset()

    def _connect(self) -> None:
        c = self.controller
        c.session.model_opened.connect(self._model_opened)
        c.session.opened.connect(self._session_opened)
        for throttle in self._throttles[:2]:
            c.timeline.changed.connect(throttle)
        c.session.observed_changed.connect(self._throttles[2])
        c.session.state_changed.connect(self._state_changed)
        c.session.hooks_changed.connect(self._hooks_changed)
        c.session.job_finished.connect(self._job_finished)
        c.session.error.connect(self.show_error)
        c.session.event.connect(lambda kind, text: self.events.add(text, kind))
        self.tree.hook_menu_requested.connect(self.hook_actions.show_menu)
        self.graph_panel.hook_menu_requested.connect(self.hook_actions.show_menu)
        self.graph_panel.refresh_requested.connect(lambda: self.trace_graph(fit=False))
        self.graph_panel.laid_out.connect(lambda graph: self.details.set_context(graph=graph))
        self.graph_panel.laid_out.connect(self._fill_model_views)
        c.session.error.connect(self._fill_model_views)  # a failed trace: fill them anyway
        c.session.error.connect(self._open_failed)
        self.graph_panel.hook_selected_requested.connect(self.hook_actions.menu_for_selection)

    def set_theme(self, theme: str) -> None:
        """Switch to ``system``, ``light`` or ``dark`` now and remember it."""
        self.settings.set_theme(theme)
        apply_theme(QApplication.instance(), theme)
        self.menus.check_theme(theme)

    def show_error(self, text: str) -> None:
        """An error dialog, unless the window runs a script (then stderr has it)."""
        if not self.scripted:
            show_error(self, text)

    def open_model(self, spec: str, options=None, config=None) -> None:
        """Open a model; with none open yet (the app's start), its graph is traced and drawn
        as soon as the model is built, while the training thread sets its training up."""
        grads = self.graph_panel.view_state.trace_choice
        self.status.showMessage(f"loading {spec}…")  # until the model opens (status_bar.reset)
        self.controller.open_model(spec, options, config, lambda s: traced(s, grads, True, True))

    def _open_failed(self, *_args) -> None:
        """No first graph to wait for (the plots are made now); a model whose first graph was
        drawn failed to open: its graph goes too."""
        if self._plots is None:
            QTimer.singleShot(0, self, self._first_graph_shown)
        if self._first_view and self.controller.session.state != LOADING:
            self._first_view = False
            self.graph_panel.clear()

    def _model_opened(self, live) -> None:
        """Forget everything of the previous model in every view (its session follows)."""
        from torch import nn  # (imported by the training thread by now)

        if not self._first_view:  # (else the panel shows this model's first graph already,
            self.selection.clear()  # and what was clicked on it while it loaded is kept)
            self.graph_panel.clear()
        self.details.reset(live.session.model)
        self.tree.clear_model()  # rebuilt once the new graph is drawn
        self.table.table.set_model(nn.Module())

    def _session_opened(self, live) -> None:
        if self.shown_run.showing:  # a model opened while a run was shown: the run view ends
            from gradexplorer.gui.runs.run_view import leave_run_view

            leave_run_view(self)
        self.setWindowTitle(f"gradexplorer — {live.spec}")
        first_view, self._first_view = self._first_view, False
        if not first_view:
            self.trace_graph(fit=True)  # first: the worker traces while the views below fill
        model = live.session.model
        self.details.set_context(model=model, stats={}, hooks={})
        if self._plots is not None:
            self.gradients.set_model(model)
            self.curves.refresh()
        else:  # the app's start: Step is enabled now, the plots (a second) are made next
            QTimer.singleShot(0, self, self.build_plots)
        self.settings.set_last_model(live.spec)
        self.settings.add_recent("models", live.spec)
        # the module tree, the parameter table and the hook-safety probe wait for the first
        # view of the graph: on 4,000-module models they cost about a second of the GUI thread
        # and the training thread, which the trace and layout need first
        self._after_first_view = live
        if first_view and self.graph_panel.drawing is not None and not self.graph_panel.busy():
            self._fill_model_views()  # the first graph was drawn before the session opened

    def _fill_model_views(self, *_args) -> None:
        """The views that wait for the first graph view (or for an error that stops it)."""
        live, self._after_first_view = self._after_first_view, None
        if live is None or live is not self.controller.session.live:
            return
        self.controller.probe_hooks()
        model = live.session.model
        self.tree.set_model(model)
        self.tree.set_hooks(self.controller.session.hooks)
        self.table.table.set_model(model)
        self.table.fit_columns()
        self.tree.show_selection(self.selection.current)  # chosen before the rows existed
        self.table.show_selection(self.selection.current)
        self._redraw_parameters()

    def trace_graph(self, fit: bool = True) -> None:
        """Trace the backward graph on the training thread (with every op's gradient when the
        panel's "Trace gradients" is on); the panel lays it out."""
        live = self.controller.session.live
        grads = self.graph_panel.view_state.trace_choice
        if live is not None:
            self.controller.post(lambda: traced(live.session, grads, fit))

    def _job_finished(self, result) -> None:
        if isinstance(result, GraphTraced) and not self.shown_run.showing and not self.controller.closing:
            self._first_view, panel = result.first, self.graph_panel
            if result.first:  # once it is on screen: training set up, plots made
                AfterFirstPaint(panel.view.viewport(), self._first_graph_shown,
                                lambda: panel.live_drawing is not None)  # (not a cached one)
            panel.set_graph(result.graph, fit=result.fit)
            notes = trace_notes(result.graph.graph)
            if notes is not None:  # short in the status bar, the full sentence in tooltip and log
                self.status.show_note(*notes)
                self.events.add(notes[1])

    def _redraw_parameters(self) -> None:  # at the selection's step (step_follow.py)
        shown = self.step_follow.shown()
        if shown is not None:
            self.table.table.set_stats(shown.params)
            self.table.show_snr(run_snr(self.shown_run.follower, shown.step, self.controller.timeline))
            self.tree.set_stats(shown.params)
            self.details.set_context(stats=shown.params, step=shown.step, caption=self.step_follow.caption())

    def _redraw_graph_tint(self) -> None:
        shown = self.step_follow.shown()
        if shown is not None:
            self.graph_panel.set_stats(shown.params)

    def _redraw_observed(self) -> None:
        observed = self.controller.session.observed
        self.details.set_context(observed=observed)
        if self._plots is not None:  # (else they show it when made: make_plot_views)
            self._plots.gradients.show_observed(observed)

    def _state_changed(self, state: str) -> None:
        if state == IDLE:  # the run ended: show its very last step everywhere
            self.flush_redraws()

    def flush_redraws(self) -> None:
        """Draw now every redraw that a throttle holds back (the plots' once they are made)."""
        for throttle in (*self._throttles, self.status.refresh_soon):
            throttle.flush()
        self.graph_panel.flush()
        if self._plots is not None:
            self._plots.curves.refresh_soon.flush()
            self._plots.flush()

    def _hooks_changed(self, hooks: dict) -> None:
        self.tree.set_hooks(hooks)
        self.details.set_context(hooks=hooks)
        if not self.graph_panel.change_hooks(hooks, self.controller.session.live.session.model):
            self.trace_graph(fit=False)  # only a trace can tell where the hook nodes go

    def open_model_dialog(self) -> None:
        """Ask for a model and open it."""
        from gradexplorer.gui.dialogs.open_model_dialog import ask_model

        current = self.controller.session.live.spec if self.controller.session.live else ""
        chosen = ask_model(self, current)
        if chosen is not None:
            self.controller.open_model(*chosen)

    def reset_model(self) -> None:
        """Open the current model again from scratch (same spec, options and settings)."""
        live = self.controller.session.live
        if live is not None:
            self.controller.open_model(live.spec, live.options, live.config)

    def busy(self) -> bool:
        """Whether work is still under way (a run, a load, a graph layout, or the model views
        still waiting for the new graph's first view)."""
        return (self.controller.busy or self.graph_panel.busy() or self._plots is None
                or self._after_first_view is not None)

    def settle(self) -> None:
        """Show everything received so far (tests and screenshots call this)."""
        self.controller.flush()
        self.flush_redraws()

    def _restore(self) -> None:
        self.resize(first_size(self))
        geometry, state = self.settings.geometry(), self.settings.window_state()
        self._clamp_pending = geometry is not None and self.restoreGeometry(geometry)
        self._restored = state is not None and self.restoreState(state)

    def showEvent(self, event) -> None:  # noqa: N802 - Qt API
        """Give the docks sensible sizes the first time the app runs; a restored layout
        squeezed by a smaller screen (or saved squeezed) gets the docks' shares back."""
        super().showEvent(event)
        self.dock_shares.tidy_soon()  # Qt's stray dock tab bars
        if self._clamp_pending:  # saved on a bigger screen: fit this one (frame included)
            self._clamp_pending = False
            clamp_to_screen(self)
        if not self._restored:
            self._restored = True
            self.dock_shares.apply()
        else:
            self.dock_shares.recover_soon()

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt API
        """Squeezed docks recover their share once the window has grown again."""
        super().resizeEvent(event)
        self.dock_shares.window_resized()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt API
        """Remember the layout, stop the worker and wait for it (not as the first model opens)."""
        self.settings.save_window(self.saveGeometry(), self.saveState())
        if self.quit_fast and self.controller.session.live is None:  # nothing to lose: first_view.leave_start
            return leave_start(self, lambda: super(MainWindow, self).closeEvent(event))
        self.hide()  # off the screen now (the training thread may still be importing torch or
        QApplication.sync()  # tracing a first graph, which the worker's shutdown waits for)
        self.hook_actions.close()  # stops an A/B job on the training thread after its current step
        if self._plots is not None:
            self.overlay.close()
        run_view = sys.modules.get("gradexplorer.gui.runs.run_view")  # only it shows runs; importing
        if run_view is not None:  # it here waited for the training thread's import of torch
            run_view.close_run(self)
        self.controller.close()
        self.graph_panel.layouts.wait(5000)
        for window in self.file_actions.snapshot_windows:
            window.close()
        overlay = () if self._plots is None else (self._plots.overlay, self._plots.reference)
        disconnect_observers(self.selection, self.controller.session, self.controller.timeline,
                             self.graph_panel.view_state, *overlay)  # no view of it is called again
        super().closeEvent(event)
