"""File commands: snapshots (export, every K, open, compare), runs, and saving the graph or plots."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QFileDialog, QInputDialog, QMainWindow, QMenu

from gradexplorer.core.messages.errors import UserError
from gradexplorer.gui.window.run_controls import make_action

IMAGE_FILTER = "PNG image (*.png);;SVG drawing (*.svg)"

PLOT_NAMES = ("histogram", "histogram over steps", "gradient flow", "loss and gradient norm")


class FileActions(QObject):
    """Builds the snapshot and image entries of the File menu and carries them out."""

    def __init__(self, window: QMainWindow) -> None:
        super().__init__(window)
        self.window = window
        self.snapshot_windows: list[QMainWindow] = []
        self.export_action = make_action(window, "Export snapshot", "export", "Ctrl+E",
                                         self.export_now)
        self.every_action = make_action(window, "Export every K steps…", "export", None,
                                        self.toggle_every)
        self.every_action.setCheckable(True)
        self.open_action = make_action(window, "Open snapshot…", "snapshot", "Ctrl+Shift+O",
                                       self.open_snapshot)
        self.compare_action = make_action(window, "Compare snapshots…", "compare", None,
                                          self.compare_snapshots)
        self.run_action = make_action(window, "Open run…", "open", "Ctrl+Shift+R", self.open_run)
        self.save_graph_action = make_action(window, "Save graph image…", "image", "Ctrl+S",
                                             self.save_graph)

    def add_to(self, menu: QMenu) -> None:
        """Put the actions (and a plot-saving submenu) into ``menu``."""
        for action in (self.export_action, self.every_action, self.open_action, self.compare_action,
                       self.run_action):
            menu.addAction(action)
        menu.addSeparator()
        menu.addAction(self.save_graph_action)
        plots = menu.addMenu("Save plot image")
        for label in PLOT_NAMES:  # the plots are looked up when chosen (made after the start)
            plots.addAction(label, lambda n=label: self.save_plot(self.plots()[n], n))
        plots.addSeparator()
        plots.addAction("Image size…", self.ask_plot_image_size)

    def plots(self) -> dict:
        w = self.window
        return {"histogram": w.gradients.histogram, "histogram over steps": w.gradients.heatmap,
                "gradient flow": w.gradients.flow, "loss and gradient norm": w.curves.plots}

    # -- helpers ------------------------------------------------------------------------
    def _folder(self, caption: str) -> str | None:
        settings = self.window.settings
        folder = QFileDialog.getExistingDirectory(self.window, caption, settings.last_dir())
        if folder:
            settings.set_last_dir(folder)
        return folder or None

    def _save_name(self, caption: str, stem: str) -> Path | None:
        start = str(Path(self.window.settings.last_dir() or ".") / f"{stem}.png")
        path, _ = QFileDialog.getSaveFileName(self.window, caption, start, IMAGE_FILTER)
        if not path:
            return None
        self.window.settings.set_last_dir(str(Path(path).parent))
        return Path(path)

    def _guard(self, fn, *args) -> None:
        try:
            fn(*args)
        except (UserError, OSError) as exc:
            self.window.show_error(str(exc))

    # -- commands -------------------------------------------------------------------------
    def export_now(self) -> None:
        """Ask for a folder and export the latest step there."""
        folder = self._folder("Export snapshot into folder")
        if folder:
            self.window.controller.export_snapshot(folder)

    def toggle_every(self, on: bool) -> None:
        """Start (asking folder and K) or stop exporting every K steps."""
        controller = self.window.controller
        if not on:
            controller.export_every(None)
            return
        every, ok = QInputDialog.getInt(self.window, "Export every K steps", "K", 10, 1, 1_000_000)
        folder = self._folder("Export snapshots into folder") if ok else None
        if folder is None:
            self.every_action.setChecked(False)
            return
        controller.export_every(folder, every)

    def open_snapshot(self, path: str | None = None, other: str | None = None) -> QMainWindow | None:
        """Browse a snapshot (or compare it with ``other``) in a window of its own."""
        from gradexplorer.gui.snapshots.snapshot_window import SnapshotWindow

        path = path or self._folder("Open snapshot folder")
        if not path:
            return None
        try:
            window = SnapshotWindow(path, other)
        except UserError as exc:
            self.window.show_error(str(exc))
            return None
        self.snapshot_windows.append(window)
        for folder in (other, path):  # path ends up first
            if folder:
                self.window.settings.add_recent("snapshots", str(Path(folder).resolve()))
        window.show()
        return window

    def open_run(self, path: str | None = None):
        """Show a run directory written by ``gradexplorer.watch`` and follow it as it grows."""
        from gradexplorer.gui.runs.run_view import show_run

        path = path or self._folder("Open run folder")
        return show_run(self.window, path) if path else None

    def compare_snapshots(self) -> None:
        """Ask for two snapshot folders and compare them side by side."""
        first = self._folder("Snapshot A")
        second = self._folder("Snapshot B") if first else None
        if first and second:
            self.open_snapshot(first, second)

    def save_graph(self, path: Path | None = None) -> None:
        """Save the whole graph as PNG or SVG."""
        panel = self.window.graph_panel
        if panel.drawing is None:
            return
        path = path or self._save_name("Save graph image", "graph")
        if path is not None:
            from gradexplorer.gui.image_export import save_scene  # (pyqtgraph: made by now)

            view = panel.view
            self._guard(save_scene, view.scene(), view.canvas.boundingRect(), path)

    def save_plot(self, plot, name: str, path: Path | None = None) -> None:
        """Save one plot as PNG (at the chosen image size) or SVG."""
        path = path or self._save_name(f"Save {name}", name.replace(" ", "-"))
        if path is not None:
            from gradexplorer.gui.image_export import save_plot

            width, dpi = self.window.settings.plot_image_size()
            self._guard(save_plot, getattr(plot, "ci", plot), path, width, dpi)  # ci: a layout

    def ask_plot_image_size(self) -> None:
        """Ask for the width (pixels) and DPI of saved plot images; remembered."""
        settings = self.window.settings
        width, dpi = settings.plot_image_size()
        width, ok = QInputDialog.getInt(self.window, "Plot image size", "Width in pixels (the "
                                        "height follows the plot's shape):", width, 200, 8000, 100)
        if not ok:
            return
        dpi, ok = QInputDialog.getInt(self.window, "Plot image size", "Resolution (DPI):", dpi,
                                      36, 1200, 12)
        if ok:
            settings.set_plot_image_size(width, dpi)
