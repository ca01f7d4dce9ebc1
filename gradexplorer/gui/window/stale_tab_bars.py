"""Tab bars QMainWindow leaves behind.

Qt (6.11) creates a tab bar for a group of tabbed docks more than once: tabifying a second
group while another exists leaves copies of the new group's first bar ("Training | Events"),
and ``restoreState`` (start-up, View → Reset layout) replaces every bar. Qt deletes the copies
later (``deleteLater``), but until the event loop gets there they stay shown where they were
first put, over the Model dock: in the first frames, and in every grab of a window driven by
``processEvents`` (scripted screenshots). A bar is in use when its tabs are exactly its dock
group and it sits against that group; of copies in the same place the newest is Qt's own.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDockWidget, QMainWindow, QTabBar

NEAR = 6  # pixels between a tab bar and its docks


def stale_tab_bars(window: QMainWindow) -> list[QTabBar]:
    """The window's shown dock tab bars that its layout no longer uses."""
    docks = {dock.windowTitle(): dock for dock in window.findChildren(QDockWidget)}
    bars = [bar for bar in window.findChildren(QTabBar, options=Qt.FindDirectChildrenOnly)
            if not bar.isHidden() and bar.count()]
    used: dict[frozenset[str], QTabBar] = {}
    for bar in bars:  # children in creation order: a newer copy wins
        titles = frozenset(bar.tabText(i) for i in range(bar.count()))
        dock = docks.get(bar.tabText(max(bar.currentIndex(), 0)))
        if dock is None or dock.isFloating():
            continue
        group = frozenset(d.windowTitle() for d in [dock, *window.tabifiedDockWidgets(dock)])
        if group == titles and against(bar, dock):
            used[titles] = bar
    return [bar for bar in bars if bar not in used.values()]


def against(bar: QTabBar, dock: QDockWidget) -> bool:
    """``bar`` touches ``dock`` (tabs sit above or below the dock they switch)."""
    return bar.geometry().intersects(dock.geometry().adjusted(-NEAR, -NEAR, NEAR, NEAR))


def hide_stale_tab_bars(window: QMainWindow) -> int:
    """Hide the tab bars the layout left behind; how many."""
    stale = stale_tab_bars(window)
    for bar in stale:
        bar.hide()
    return len(stale)
