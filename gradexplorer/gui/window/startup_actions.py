"""What the command line asks of the window once its first model is open: hooks, a selection."""

from __future__ import annotations

from PySide6.QtCore import QObject


class StartupActions(QObject):
    """Attaches ``--hook`` actions and selects ``--select`` when the first session opens."""

    def __init__(self, window, hooks: list[tuple[str, str]], select: str | None) -> None:
        super().__init__(window)
        self.window, self.hooks, self.select = window, hooks, select
        window.controller.session.opened.connect(self._apply)

    def _apply(self, live) -> None:
        self.window.controller.session.opened.disconnect(self._apply)
        for module, action in self.hooks:
            self.window.controller.attach_hook(module, action)  # queued before any run
        if self.select:
            self._select(live, self.select)

    def _select(self, live, name: str) -> None:
        params = dict(live.session.model.named_parameters())
        modules = dict(live.session.model.named_modules())
        if name in params:
            self.window.selection.select(module=name.rpartition(".")[0], param=name, source="startup")
        elif name in modules:
            self.window.selection.select(module=name, source="startup")
        else:
            self.window.controller.session.error.emit(f"--select {name!r}: no such parameter or module")
