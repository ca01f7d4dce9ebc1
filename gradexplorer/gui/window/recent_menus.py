"""File → Recent models and Recent snapshots: rebuilt from the settings each time they open."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QMainWindow, QMenu

from gradexplorer.gui.settings import AppSettings


class RecentMenu(QMenu):
    """The entries of one recent list (``models`` or ``snapshots``), newest first.

    Choosing an entry calls ``open_entry(entry)``; "Clear" empties the list.
    """

    def __init__(self, title: str, kind: str, settings: AppSettings, open_entry,
                 parent: QMainWindow | None = None) -> None:
        super().__init__(title, parent)
        self.kind, self.settings, self.open_entry = kind, settings, open_entry
        self.aboutToShow.connect(self.rebuild)
        self.rebuild()

    def rebuild(self) -> None:
        """Re-read the list from the settings."""
        self.clear()
        entries = self.settings.recent(self.kind)
        for entry in entries:
            action = self.addAction(entry, lambda entry=entry: self.open_entry(entry))
            action.setToolTip(entry)
        if not entries:
            self.addAction("(none yet)").setEnabled(False)
            return
        self.addSeparator()
        self.addAction("Clear list", self.clear_list)

    def clear_list(self) -> None:
        for entry in self.settings.recent(self.kind):
            self.settings.forget_recent(self.kind, entry)
        self.rebuild()


def add_recent_menus(window: QMainWindow, menu: QMenu) -> tuple[RecentMenu, RecentMenu]:
    """Add File → Recent models and Recent snapshots to ``menu``; returns the two."""
    settings = window.settings

    def open_snapshot(folder: str) -> None:
        if not Path(folder).is_dir():
            settings.forget_recent("snapshots", folder)
            window.show_error(f"snapshot folder {folder} no longer exists")
            return
        window.file_actions.open_snapshot(folder)

    models = RecentMenu(
        "Recent models", "models", settings, lambda spec: window.controller.open_model(spec), window)
    snapshots = RecentMenu("Recent snapshots", "snapshots", settings, open_snapshot, window)
    menu.addMenu(models)
    menu.addMenu(snapshots)
    return models, snapshots
