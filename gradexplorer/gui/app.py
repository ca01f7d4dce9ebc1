"""Starting the desktop app: QApplication, theme, main window, first model."""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from gradexplorer.core.model.options import DEFAULT_SPEC, ModelOptions
from gradexplorer.core.session.config import SessionConfig
from gradexplorer.gui.crash_log import start_crash_log
from gradexplorer.gui.gui_thread_gc import collect_on_gui_thread
from gradexplorer.gui.native_preload import preload_torch_library
from gradexplorer.gui.pyside_scan import scan_imports_cheaply
from gradexplorer.gui.qt_check import check_qt_binding
from gradexplorer.gui.settings import APPLICATION, ORGANIZATION, AppSettings
from gradexplorer.gui.theme import apply_theme
from gradexplorer.gui.window.cached_first_graph import CachedFirstGraph
from gradexplorer.gui.window.first_view import AfterFirstPaint


def application(plots: bool = True) -> QApplication:
    """The QApplication, created and themed on first use; from then on Python's cyclic garbage
    collector runs on the GUI thread only (``gui_thread_gc``), so no thread but the GUI's
    ever deletes a Qt object. ``plots=False``: pyqtgraph is configured later (``apply_theme``)."""
    check_qt_binding()
    scan_imports_cheaply()  # (the commands did it before importing this module; tests here)
    app = QApplication.instance()
    if app is None:
        app = QApplication(sys.argv[:1])
        app.setOrganizationName(ORGANIZATION)
        app.setApplicationName(APPLICATION)
        app.setApplicationDisplayName("gradexplorer")
        app.setDesktopFileName("io.github.gradexplorer.GradExplorer")
        apply_theme(app, plots=plots)
    collect_on_gui_thread()
    return app


def start_app(plots: bool = True) -> QApplication:
    """``application()`` for a launch from the command line: a native crash's stacks go to
    the crash log (``crash_log``) that the About box names."""
    start_crash_log()
    return application(plots)


def scratch_settings():
    """Throw-away settings, so that scripted screenshots never depend on past launches."""
    import tempfile

    from PySide6.QtCore import QSettings

    folder = tempfile.mkdtemp(prefix="gradexplorer-settings-")
    return QSettings(str(Path(folder) / "settings.ini"), QSettings.IniFormat)


def build_window(settings: AppSettings | None = None, theme: str | None = None,
                 plots_later: bool = False):
    """A themed main window (not shown yet); ``theme`` overrides the remembered one.
    ``plots_later``: its pyqtgraph views are made by ``MainWindow.build_plots`` (the app's
    start: after the first graph), and pyqtgraph is not imported before."""
    app = application(not plots_later)
    from gradexplorer.gui.window.main_window import MainWindow

    settings = settings or AppSettings()
    if theme is not None:
        settings.set_theme(theme)
    apply_theme(app, settings.theme(), plots=not plots_later)
    return MainWindow(settings, plots_later=plots_later)


def launch(
    spec: str | None = None,
    options: ModelOptions | None = None,
    config: SessionConfig | None = None,
    steps: int = 0,
    screenshot: Path | None = None,
    script=None,
    hooks: list[tuple[str, str]] = (),
    select: str | None = None,
    trace_grads: bool = False,
    theme: str | None = None,
    window_size: tuple[int, int] | None = None,
    overlay: tuple = ((), None),
) -> int:
    """Open the window on a model and run the event loop; returns the exit status.
    ``overlay``: (run directories to overlay on the live session, the curves' x axis or None;
    given, the plots are made at once)."""
    app = start_app(plots=False)
    settings = AppSettings(scratch_settings() if screenshot else None)
    window = build_window(settings, theme, plots_later=True)
    preloading = preload_torch_library()  # on a spare core while the window shows
    if window_size is not None:
        window.resize(*window_size)
    remembered = None if spec is not None or screenshot else settings.last_model()
    spec = spec or remembered or DEFAULT_SPEC
    window.graph_panel.view_state.trace_grads = trace_grads
    window.end_process_at_close()  # closed before a model opens: the process ends at once
    # the first graph drawn before torch loads, when cached (a screenshot: only the shipped one)
    first_graph = CachedFirstGraph(window, spec, options or ModelOptions(), user_cache=not screenshot)
    window.time_startup(preloading=preloading is not None)  # bench/gui.py --startup only
    window.show()
    if remembered and remembered != DEFAULT_SPEC:
        fall_back_to_default(window.controller, config or SessionConfig())
    if script is not None:
        script(window)
    if overlay[0] or overlay[1]:
        from gradexplorer.gui.runs.run_compare import overlay_opener

        overlay_opener(lambda _w, _p: None, overlay[0], overlay[1])(window, None)
    if hooks or select:
        from gradexplorer.gui.window.startup_actions import StartupActions

        StartupActions(window, list(hooks), select)
    if screenshot is not None or steps:
        from gradexplorer.gui.window.screenshot import ScreenshotRun

        ScreenshotRun(window, steps, screenshot)  # held by the window (run_script)
    # the window shows before torch is imported: once it has painted, the training thread
    # imports torch, builds the model and traces its first graph, then sets training up
    def open_first() -> None:
        window.open_model(spec, options or ModelOptions(), config or SessionConfig())
        first_graph.watch()

    AfterFirstPaint(window, open_first, latest_ms=1000)
    collect_after_first_graph(window)
    status = app.exec()
    return status if window.exit_status is None else window.exit_status


def end_process_now(status: int, settings: AppSettings) -> None:
    """End the process now with ``status``, not waiting for the training thread (the window
    closed while the first model opened: nothing of it can be lost; ``first_view.leave_start``):
    settings written, output flushed, no exit handler run (one waits for that thread)."""
    import os

    settings.sync()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):  # (no console, or closed)
            pass
    os._exit(status)


def collect_after_first_graph(window) -> None:
    """No garbage collection and no Numba warm-up (``kernel_warmup.hold_warmups``) from now
    until the first model is open, Step enabled, and its plots made (at most 30 s): the objects
    torch's import makes are collected once after it, not scanned on its way (a full collection
    of them: 0.15 s of the GUI thread), and the kernels load (a second of CPU) after it too."""
    from gradexplorer.core.stats.backends.kernel_warmup import hold_warmups, release_warmups

    collector = collect_on_gui_thread()
    collector.hold()
    hold_warmups(window)
    session = window.controller.session

    def resume() -> None:
        collector.resume()
        release_warmups(window)

    def opened(*_args) -> None:
        session.opened.disconnect(opened)
        session.error.disconnect(opened)
        QTimer.singleShot(0, resume)  # after the rest of the open (the plots: main_window)

    session.opened.connect(opened)
    session.error.connect(opened)
    QTimer.singleShot(30_000, resume)


def fall_back_to_default(controller, config: SessionConfig) -> None:
    """If the model remembered from last time no longer opens, open the default example."""

    def failed(_text: str) -> None:
        forget()
        if controller.session.live is None:
            controller.open_model(DEFAULT_SPEC, ModelOptions(), config)

    def forget(*_args) -> None:
        controller.session.error.disconnect(failed)
        controller.session.opened.disconnect(forget)

    controller.session.error.connect(failed)
    controller.session.opened.connect(forget)


def open_snapshot_window(path: Path, other: Path | None = None, screenshot: Path | None = None) -> int:
    """Browse one snapshot (or two compared) in its own window; returns the exit status."""
    from gradexplorer.gui.snapshots.snapshot_window import SnapshotWindow
    from gradexplorer.gui.window.screenshot import save_window_image

    app = start_app()
    window = SnapshotWindow(path, other)
    window.show()
    if screenshot is not None:
        def shoot() -> None:
            save_window_image(window, screenshot)
            print(f"saved {screenshot}")
            window.close()
        QTimer.singleShot(300, shoot)
    return app.exec()


def open_run_window(path: Path, screenshot: Path | None = None,
                    window_size: tuple[int, int] | None = None, show=None,
                    theme: str | None = None) -> int:
    """Show a run directory in the main window, following it while it grows (``show(window,
    path)`` instead of plain ``show_run``: e.g. a spike or a divergence opened; step_forensics)."""
    from gradexplorer.gui.runs.run_view import show_run
    from gradexplorer.gui.window.screenshot import save_window_image

    app = start_app()
    window = build_window(AppSettings(scratch_settings() if screenshot else None), theme)
    if window_size is not None:
        window.resize(*window_size)
    try:
        window.show()
        (show or show_run)(window, path)  # a damaged run: a dialog
    except BaseException:
        window.close()  # stops its training thread: a QThread destroyed running aborts the app
        raise
    if screenshot is not None:
        def shoot() -> None:
            window.settle()
            QApplication.processEvents()
            if window.busy():  # a big graph still being laid out
                QTimer.singleShot(100, shoot)
                return
            save_window_image(window, screenshot)
            print(f"saved {screenshot}")
            window.close()
        QTimer.singleShot(1500, shoot)
    return app.exec()
