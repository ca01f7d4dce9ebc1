"""The right-click menu that attaches or detaches a hook on one module, and the window's hook
commands that open it (or an A/B window of a hook)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QPoint, QPointF, Qt, Signal
from PySide6.QtGui import QCursor
from PySide6.QtWidgets import QFileDialog, QInputDialog, QMenu, QWidget

from gradexplorer.core.model.callable_finder import list_callables
from gradexplorer.gui.theme import icon

# (label, action name, argument prompt, default argument); None prompt: no argument.
CHOICES = (
    ("Observe", "observe", None, None),
    ("Scale…", "scale", "Multiply the input gradients by", 0.5),
    ("Block", "block", None, None),
    ("Clip…", "clip", "Clip the input-gradient norm to", 1.0),
    ("Noise…", "noise", "Add Gaussian noise of standard deviation", 0.01),
)


NOISE_SEED = 0  # the seed the noise dialog offers


class HookMenu(QMenu):
    """Emits what the user chose; the controller applies it between steps."""

    attach_requested = Signal(str, str)  # module path, action spec
    detach_requested = Signal(str)

    def __init__(self, module: str, current: str | None = None, problem: str | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.module = module
        title = self.addAction(icon("hook"), f"{module or '(model)'}: "
                               + (f"hooked ({current})" if current else "no hook"))
        title.setEnabled(False)
        if problem:
            note = self.addAction(f"⚠ {problem}")
            note.setEnabled(False)
        self.addSeparator()
        for label, name, prompt, default in CHOICES:
            self.addAction(label, lambda n=name, p=prompt, d=default: self._choose(n, p, d))
        once = self.addMenu("Once (first backward only)")
        for label, name, prompt, default in CHOICES[1:]:
            once.addAction(label, lambda n=name, p=prompt, d=default: self._choose(n, p, d, "once:"))
        self.addAction("User hook file…", self._choose_file)
        self.addSeparator()
        detach = self.addAction(icon("unhook"), "Detach", lambda: self.detach_requested.emit(module))
        detach.setEnabled(bool(current))

    def _choose(self, name: str, prompt: str | None, default: float | None, prefix: str = "") -> None:
        spec = name
        if prompt is not None:
            value, ok = QInputDialog.getDouble(self.parentWidget(), f"{name} {self.module}", prompt,
                                               default, -1e9, 1e9, 6)
            if not ok:
                return
            spec = f"{name}:{value:g}"
        if name == "noise":  # seeded: the same noise again on a replay or another run
            seed, ok = QInputDialog.getInt(self.parentWidget(), f"noise {self.module}",
                                           "Seed of the noise (the same seed, the same noise)",
                                           NOISE_SEED, 0, 2**31 - 1)
            if not ok:
                return
            spec += f":{seed}"
        self.attach_requested.emit(self.module, prefix + spec)

    def _choose_file(self) -> None:
        parent = self.parentWidget()
        path, _ = QFileDialog.getOpenFileName(parent, "Hook file", "", "Python files (*.py)")
        if not path:
            return
        names = list_callables(path) or ["hook"]
        function, ok = QInputDialog.getItem(parent, "Hook function",
                                            f"Function in {Path(path).name} "
                                            "(hook(module, grad_input, grad_output))",
                                            names, 0, True)
        if ok and function:
            self.attach_requested.emit(self.module, f"file:{path}:{function}")


def menu_anchor(window, module: str) -> QPoint:
    """Where the hook menu of ``module`` opens when asked from the keyboard (H): at its node
    in the graph when one is selected and in view, else at its row in the module tree, else at
    the mouse pointer."""
    view = window.graph_panel.view
    drawing = window.graph_panel.drawing
    for index in window.graph_panel.selected_nodes().tolist():
        point = view.mapFromScene(QPointF(*drawing.xy[index].tolist()))
        if view.isVisible() and view.viewport().rect().contains(point):
            return view.viewport().mapToGlobal(point)
    item = window.tree._items.get(module)
    if item is not None and window.tree.isVisible():
        rect = window.tree.visualItemRect(item)
        if rect.isValid() and window.tree.viewport().rect().intersects(rect):
            return window.tree.viewport().mapToGlobal(rect.center())
    return QCursor.pos()


class HookActions:
    """The window's commands on one module's hooks: the attach/detach menu (the latest shown:
    ``menu``) and A/B windows of a hook on the current model (``ab_windows``, open ones); the
    menu also keeps the clicked op's or the module's gradients (``keep``: KeepActions)."""

    def __init__(self, window) -> None:
        from gradexplorer.gui.graph.keep_gradients import KeepActions

        self.window = window
        self.menu: HookMenu | None = None
        self.ab_windows: list = []
        self.keep = KeepActions(window)

    def show_menu(self, module: str, where: QPoint) -> HookMenu | None:
        """Pop up the attach/detach menu for ``module`` (it deletes itself when closed)."""
        window = self.window
        if window.shown_run.showing:
            window.statusBar().showMessage("a followed run is shown: hooks act on a model opened "
                                           "in the app (File → Open model)", 8000)
            return None
        controller = window.controller
        menu = HookMenu(module, controller.session.hooks.get(module), controller.hook_problem(module), window)
        menu.setAttribute(Qt.WA_DeleteOnClose)
        menu.attach_requested.connect(controller.attach_hook)
        menu.detach_requested.connect(controller.detach_hook)
        self.keep.add_to_menu(menu, module)
        menu.popup(where)
        self.menu = menu
        return menu

    def menu_for_selection(self) -> None:
        """The hook menu for the selected module, at its item (H)."""
        selection = self.window.selection.current
        module = selection.module if selection.module is not None else (
            selection.param.rpartition(".")[0] if selection.param else None)
        if module is None:
            self.window.statusBar().showMessage("select a module first (click a node or a tree row)", 5000)
            return
        self.show_menu(module, menu_anchor(self.window, module))  # at the item, not the mouse

    def open_ab(self, module: str | None = None, action: str | None = None, steps: int = 50):
        """A/B of a hook on the current model in a window of its own (asks when not given)."""
        from gradexplorer.gui.hooks.ab_window import ABWindow, ab_run_factory, ask_ab

        window, live = self.window, self.window.controller.session.live
        if live is None:
            return None
        if action is None:
            try:
                chosen = ask_ab(window, module if module is not None else window.selection.current.module)
            except Exception as exc:  # noqa: BLE001 - a typo in the dialog
                window.show_error(str(exc))
                return None
            if chosen is None:
                return None
            module, action, steps = chosen
        from gradexplorer.core.graph.style import where_used

        ab = ABWindow(ab_run_factory(live, module or "", action), steps, window.controller,
                      live.session.device,
                      where=where_used(window.graph_panel.graph, module=module) if module else "")
        ab.show()
        self.ab_windows = [w for w in self.ab_windows if w.isVisible()] + [ab]
        return ab

    def close(self) -> None:
        """Close the A/B windows (each stops its job on the training thread after its step)."""
        for ab in self.ab_windows:
            ab.close()
        self.ab_windows = []
        self.keep.close()
