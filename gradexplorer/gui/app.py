"""Starting the desktop app: QApplication, theme, main window, first model."""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtWidgets import QApplication

from gradexplorer.core.engine import SessionConfig
from gradexplorer.core.model_spec import DEFAULT_SPEC, ModelOptions
from gradexplorer.gui.qt_check import check_qt_binding
from gradexplorer.gui.settings import APPLICATION, ORGANIZATION, AppSettings
from gradexplorer.gui.theme import apply_theme


def application() -> QApplication:
    """The QApplication, created and themed on first use."""
    check_qt_binding()
    app = QApplication.instance()
    if app is None:
        app = QApplication(sys.argv[:1])
        app.setOrganizationName(ORGANIZATION)
        app.setApplicationName(APPLICATION)
        app.setApplicationDisplayName("gradexplorer")
        apply_theme(app)
    return app


def build_window(settings: AppSettings | None = None):
    """A themed main window (not shown yet)."""
    application()
    from gradexplorer.gui.main_window import MainWindow

    return MainWindow(settings)


def launch(
    spec: str | None = None,
    options: ModelOptions | None = None,
    config: SessionConfig | None = None,
    steps: int = 0,
    screenshot: Path | None = None,
    script=None,
) -> int:
    """Open the window on a model and run the event loop; returns the exit status."""
    app = application()
    settings = AppSettings()
    window = build_window(settings)
    if spec is None:
        spec = (None if screenshot else settings.last_model()) or DEFAULT_SPEC
    window.show()
    if script is not None:
        script(window)
    if screenshot is not None or steps:
        from gradexplorer.gui.screenshot import ScreenshotRun

        window._scripted = ScreenshotRun(window, steps, screenshot)
    window.controller.open_model(spec, options or ModelOptions(), config or SessionConfig())
    status = app.exec()
    return getattr(window, "exit_status", status)
