"""The app's first graph drawn from the graph cache (``gui/graph/graph_cache.py``) as the window
shows, before torch is imported; the live trace replaces it, and the cache is refreshed when
the live drawing differs (another torch, an edited model). Until then nothing claims to be
live: training waits for the model as while loading, the status bar says it is loading."""

from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import QObject, QStandardPaths

from gradexplorer.gui.graph.graph_cache import (
    cache_key,
    cached_drawing,
    drawing_entry,
    entry_file,
    find_entry,
    write_entry,
)


def cache_folder() -> Path | None:
    """The user's cache folder for graphs (``$XDG_CACHE_HOME/gradexplorer/gradexplorer/graphs``
    on Linux), or None where the platform has none."""
    folder = QStandardPaths.writableLocation(QStandardPaths.CacheLocation)
    return Path(folder) / "graphs" if folder else None


class CachedFirstGraph(QObject):
    """Draws ``spec``'s cached first view on the window's graph panel (when there is one), and
    keeps the cache up to date with the live first view that follows ``watch``; without
    ``user_cache`` (scripted screenshots: nothing from past launches) only the shipped entry."""

    def __init__(self, window, spec: str, options, user_cache: bool = True) -> None:
        super().__init__(window)
        self.window, self.opening, self.writer = window, None, None
        panel, state = window.graph_panel, window.graph_panel.view_state
        self.folder = cache_folder() if user_cache else None
        self.key = None if state.trace_grads else cache_key(spec, options, state.layout, state.hook_nodes)
        self.found = None if self.key is None else find_entry(self.folder, self.key)
        drawing = None if self.found is None else cached_drawing(self.found)
        if drawing is not None:
            panel.show_cached(drawing)
        panel.laid_out.connect(self._laid_out)
        window.controller.session.error.connect(self._failed)

    @property
    def shown(self) -> bool:
        """Whether the cached drawing is on the panel (the live one has not replaced it yet)."""
        return self.window.graph_panel.cached is not None

    def watch(self) -> None:
        """The model is being opened now (``MainWindow.open_model``): its first view is the one
        to keep (a model opened later by the user is not)."""
        self.opening = self.window.controller.opening

    def _laid_out(self, _graph) -> None:
        self._stop()
        if self.key is None or self.folder is None or self.window.controller.opening != self.opening:
            return
        entry = drawing_entry(self.window.graph_panel.drawing)
        if entry is not None and entry != self.found:  # written off the GUI thread, atomically
            path, key = entry_file(self.folder, self.key), self.key
            writer = threading.Thread(target=write_entry, args=(path, key, entry),
                                      name="graph-cache", daemon=True)
            try:
                writer.start()
            except RuntimeError:  # "can't start new thread": a cache can wait for another start
                return
            self.writer = writer

    def _failed(self, _text: str) -> None:
        """The model did not open: its cached drawing goes (it is no model's any more)."""
        if self.shown:
            self.window.graph_panel.clear()
        self._stop()

    def _stop(self) -> None:
        panel, controller = self.window.graph_panel, self.window.controller
        for signal, slot in ((panel.laid_out, self._laid_out), (controller.session.error, self._failed)):
            try:
                signal.disconnect(slot)
            except (RuntimeError, TypeError, ValueError):  # (psygnal or Qt: already disconnected)
                pass
