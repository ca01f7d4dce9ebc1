"""Spreading redraws over timer ticks so that no single tick of the GUI thread does them all."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer

TICK_MS = 25  # one group per tick: with four groups each redraws at 10 Hz while data flows


class RefreshScheduler(QObject):
    """Named redraw groups; ``mark_dirty`` flags them, each tick redraws the next dirty one."""

    def __init__(self, parent: QObject | None = None, tick_ms: int = TICK_MS) -> None:
        super().__init__(parent)
        self._groups: list[tuple[str, Callable[[], None]]] = []
        self._dirty: set[str] = set()
        self._next = 0
        self._timer = QTimer(self)
        self._timer.setInterval(tick_ms)
        self._timer.timeout.connect(self.tick)

    def add(self, name: str, redraw: Callable[[], None]) -> None:
        """Register a redraw group."""
        self._groups.append((name, redraw))

    def mark_dirty(self, *names: str) -> None:
        """Flag groups (all when none named) for redrawing on coming ticks."""
        self._dirty.update(names or (n for n, _ in self._groups))
        if not self._timer.isActive():
            self._timer.start()

    def tick(self) -> None:
        """Redraw the next dirty group in turn; idle when nothing is dirty."""
        for _ in range(len(self._groups)):
            name, redraw = self._groups[self._next]
            self._next = (self._next + 1) % len(self._groups)
            if name in self._dirty:
                self._dirty.discard(name)
                redraw()
                return
        self._timer.stop()

    def flush(self) -> None:
        """Redraw every dirty group now (before a screenshot, at the end of a run)."""
        for name, redraw in self._groups:
            if name in self._dirty:
                self._dirty.discard(name)
                redraw()
        self._timer.stop()
