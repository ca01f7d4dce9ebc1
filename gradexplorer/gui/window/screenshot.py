"""``--steps N --screenshot FILE``: open, run N steps, save a picture of the window, quit."""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QApplication, QMainWindow

from gradexplorer.gui.image_export import write_image
from gradexplorer.gui.session.controller import IDLE

SETTLE_MS = 400  # let the last redraw and any layout land before grabbing


def save_window_image(window: QMainWindow, path: Path) -> Path:
    """Render ``window`` to an image file (PNG, JPEG… by extension), atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_image(window.grab().toImage(), path)


class ScreenshotRun(QObject):
    """Follows the controller: after the model opens, runs the steps, then saves and quits."""

    def __init__(self, window: QMainWindow, steps: int, path: Path | None) -> None:
        super().__init__(window)
        self.window, self.steps, self.path = window, steps, path
        self._ran = False
        controller = window.controller
        controller.session.state_changed.connect(self._state_changed)
        controller.session.error.connect(self._failed)
        window.run_script(self)

    def _state_changed(self, state: str) -> None:
        controller = self.window.controller
        if state != IDLE or controller.session.live is None:
            return
        if not self._ran and self.steps:
            self._ran = True
            QTimer.singleShot(0, lambda: controller.run(self.steps))
            return
        self._ran = True
        QTimer.singleShot(SETTLE_MS, self._finish)

    def _finish(self) -> None:
        if self.window.busy():
            QTimer.singleShot(100, self._finish)
            return
        self.window.settle()
        if self.path is not None:
            QApplication.processEvents()
            try:
                save_window_image(self.window, self.path)
            except OSError as exc:  # never leave the app running after a failed save
                self._failed(f"cannot save the screenshot {self.path}: {exc.strerror or exc}")
                return
            print(f"saved {self.path}")
        self.window.end_script(0)

    def _failed(self, text: str) -> None:
        print(f"gradexplorer: error: {text}", file=sys.stderr)
        self.window.end_script(2)
