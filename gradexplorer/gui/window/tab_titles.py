"""Room for every title of a group of tabbed docks.

A group's tab bar elides its titles when the group is narrower than they are: at 921×630 (the
app on a 1024×700 screen) the bottom group of five read "Traini…", "Eve…", "Optimi…". Each dock
of a group is made at least as wide as its group's whole titles, measured by a tab bar of the
window's own style, and ``DockShares`` leaves that room beside the side docks.
"""

from __future__ import annotations

from PySide6.QtWidgets import QDockWidget, QMainWindow, QTabBar

MARGIN = 2  # pixels beside a group's tabs (the tab bar is as wide as its dock)
LEAST = "titles_least"  # the dock property holding the least set here (a group left: put back)


def titles_width(window: QMainWindow, titles: list[str]) -> int:
    """The width a tab bar of ``window``'s style takes to show ``titles`` whole."""
    probe = QTabBar(window)
    probe.hide()
    for title in titles:
        probe.addTab(title)
    probe.ensurePolished()  # the style sheet's tab padding counts
    width = sum(probe.tabSizeHint(i).width() for i in range(probe.count()))
    probe.setParent(None)
    probe.deleteLater()
    return width


def fit_titles(window: QMainWindow) -> None:
    """Every dock at least as wide as its tab group's whole titles (a dock on its own: the
    least its layout gives it)."""
    done: set[QDockWidget] = set()
    for dock in window.findChildren(QDockWidget):
        if dock in done:
            continue
        group = [dock, *window.tabifiedDockWidgets(dock)] if not dock.isFloating() else [dock]
        least = titles_width(window, [d.windowTitle() for d in group]) + MARGIN if len(group) > 1 else 0
        for member in group:
            done.add(member)
            if (member.property(LEAST) or 0) != least:
                member.setProperty(LEAST, least)
                member.setMinimumWidth(least)
