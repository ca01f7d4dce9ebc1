"""Every window attribute is declared in MainWindow.__init__; helpers change the window's state
through methods of objects it owns (issue 20, item 4): the run shown instead of the model
(``ShownRun``), the hook menu and A/B windows (``HookActions``)."""

from __future__ import annotations

import re
from pathlib import Path

from gradexplorer.gui.models.shown_run import ShownRun

GUI = Path(__file__).resolve().parents[1] / "gradexplorer" / "gui"
# an attribute read with a default (it may not exist yet), probed, or attached to the window from outside
UNDECLARED = re.compile(r"getattr\((?:self|window)\s*,\s*[\"']_|hasattr\((?:self|window)\b"
                        r"|(?<![\w.])(?:self\.)?window\.\w+\s*=(?!=)")


def test_no_gui_module_reads_an_attribute_that_may_be_missing_or_attaches_one_to_the_window():
    found = [f"{path.relative_to(GUI)}:{n}: {line.strip()}"
             for path in sorted(GUI.rglob("*.py"))
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if UNDECLARED.search(line)]
    assert found == []


def test_the_window_declares_the_parts_helpers_used_to_attach(qtbot):
    """The menus, the plots' ledger/spike views and the Runs dock are objects the window owns;
    what a script or the start-up clock needs is declared before any helper runs."""
    from gradexplorer.gui.window.main_window import MainWindow

    window = MainWindow(plots_later=True)
    qtbot.addWidget(window)
    declared = vars(window)
    assert {"menus", "startup_clock", "script", "scripted", "exit_status", "_plots"} <= set(declared)
    assert window._plots is None and window.menus.file_menu.title() == "&File"
    before = set(vars(window))
    forensics, compare = window.forensics, window.run_compare  # the plots are made now
    assert set(vars(window)) == before  # nothing attached from outside
    assert window.dock_named("spikes") is forensics.spikes_dock
    assert window.dock_named("curves") is window.curves_dock
    texts = [a.text() for a in window.menus.file_menu.actions()]
    assert texts.index("Add run to compare…") == texts.index(window.file_actions.run_action.text()) + 1
    assert compare.runs_dock.toggleViewAction() is window.menus.view_menu.actions()[0]


class Recorder:
    def __init__(self, log: list, name: str) -> None:
        self.log, self.name = log, name

    def stop(self) -> None:
        self.log.append(f"{self.name} stopped")

    def close(self) -> None:
        self.log.append(f"{self.name} closed")


def test_a_shown_run_is_waited_for_followed_stopped_and_left():
    shown, log = ShownRun(), []
    assert not shown.showing and shown.follower is None and shown.waiter is None
    shown.enter(Path("runs/a"))
    waiter, follower = Recorder(log, "waiter"), Recorder(log, "follower")
    shown.wait(waiter)
    assert shown.showing and shown.waiter is waiter
    shown.follow(follower)  # the run exists now: no more waiting
    assert shown.waiter is None and shown.is_followed_by(follower) and not shown.is_followed_by(waiter)
    shown.stop()
    assert log == ["follower closed"] and shown.follower is None and shown.showing
    shown.wait(waiter)
    shown.stop()
    assert log == ["follower closed", "waiter stopped"]
    assert shown.leave() and not shown.showing and not shown.leave()


def test_the_window_declares_its_state_before_anything_happens(qtbot, make_window):
    window = make_window()
    assert not window.shown_run.showing and window.hook_actions.menu is None
    assert window.hook_actions.ab_windows == [] and window.exit_status is None
    assert set(window.menus.theme_actions) == {"system", "light", "dark"}


def test_closing_the_window_ends_every_view_connection_to_its_models(qtbot):
    """Signals disconnected on close (issue 20): after the window closes and Qt deletes its
    widgets, a model that outlives it emits to no one (a slot of a deleted widget would raise)."""
    from PySide6.QtCore import QCoreApplication, QEvent

    from gradexplorer.gui.models.observers import signals_of
    from gradexplorer.gui.models.selection import Selection
    from gradexplorer.gui.window.main_window import MainWindow

    window = MainWindow()  # the plots made: curves, bands, ledger, Runs dock all observe
    models = [window.selection, window.controller.timeline, window.controller.session,
              window.graph_panel.view_state, window.overlay]
    observers = [sum(len(signal) for signal in signals_of(model)) for model in models]
    assert all(observers), observers
    window.close()
    assert [sum(len(signal) for signal in signals_of(model)) for model in models] == [0] * len(models)
    window.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    selection, timeline, _session, view_state, overlay = models
    selection.changed.emit(Selection(param="0.weight", module="0"))
    timeline.changed.emit()
    view_state.tint = not view_state.tint
    overlay.changed.emit()
