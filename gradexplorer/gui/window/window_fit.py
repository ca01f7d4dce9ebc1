"""Fitting the main window to the screen it is on.

The first size is at most 90% of the available screen; a geometry saved on a bigger screen is
clamped to this one; docks that a small window squeezed get their share back when the window
grows (so a squeezed layout, saved or not, always recovers); View → Reset layout puts every
dock back where a fresh start has it.
"""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize, Qt, QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QDockWidget, QMainWindow

from gradexplorer.gui.window.stale_tab_bars import hide_stale_tab_bars
from gradexplorer.gui.window.tab_titles import fit_titles

SCREEN_SHARE = 0.9  # the most of the available screen a window opens at
FIRST_SIZE = QSize(1500, 920)  # wanted on a big screen, shrunk to fit smaller ones
SMALLEST = QSize(800, 600)  # the window (all panels on screen) fits this
RECOVER_BELOW = 0.75  # a dock under this part of its share has been squeezed
RECOVER_MS = 150  # after resizing stops
OVER_SHARE = 1.2  # after a shrink, a dock over this part of its share gives the rest back
# the graph's least height when docks above or below it share the window's height: its search
# row, toolbar and key, and a view of about 190 pixels (a Training dock given its plots' room at
# 921×630 left the graph 100)
CENTRAL_LEAST = 315


def screen_is_real() -> bool:
    """False on Qt's offscreen platform (tests, scripted screenshots): its 800×800 "screen" is
    no screen a person looks at, so windows there keep their designed size."""
    return QGuiApplication.platformName() != "offscreen"


def first_size(window: QMainWindow) -> QSize:
    """The size a window without a remembered geometry opens at."""
    return fitted_size(FIRST_SIZE, available(window)) if screen_is_real() else QSize(FIRST_SIZE)


def screen_size(window, wanted: QSize) -> QSize:
    """The size a secondary window (snapshot, A/B, compare) opens at: ``wanted``, shrunk to the
    screen it is on (a 1200×760 snapshot window overflowed a 1024×700 screen)."""
    return fitted_size(wanted, available(window)) if screen_is_real() else QSize(wanted)


def available(window: QMainWindow) -> QRect:
    """The available geometry of the screen the window is on (the primary one before it shows)."""
    screen = window.screen() or QGuiApplication.primaryScreen()
    return screen.availableGeometry()


def fitted_size(wanted: QSize, screen: QRect) -> QSize:
    """``wanted``, no bigger than 90% of ``screen``."""
    return QSize(min(wanted.width(), int(screen.width() * SCREEN_SHARE)),
                 min(wanted.height(), int(screen.height() * SCREEN_SHARE)))


def clamp_to_screen(window: QMainWindow) -> None:
    """Shrink and move a (restored) window so that all of it lies on its screen."""
    if window.isMaximized() or window.isFullScreen() or not screen_is_real():
        return
    screen = available(window)
    frame = window.frameGeometry()
    extra = frame.size() - window.geometry().size()  # title bar and borders
    if frame.width() > screen.width() or frame.height() > screen.height():
        window.resize(fitted_size(window.size(), screen.adjusted(0, 0, -extra.width(), -extra.height())))
        frame = window.frameGeometry()
    left = min(max(frame.left(), screen.left()), screen.right() - frame.width() + 1)
    top = min(max(frame.top(), screen.top()), screen.bottom() - frame.height() + 1)
    if (left, top) != (frame.left(), frame.top()):
        window.move(left, top)


def _least(window: QMainWindow, dock: QDockWidget, orient: Qt.Orientation) -> int:
    """The least extent ``dock``'s place takes in ``orient``: its contents' and those of the
    docks tabbed with it (their tabs' titles included: ``tab_titles``)."""
    hints = [d.minimumSizeHint().expandedTo(d.minimumSize())
             for d in (dock, *window.tabifiedDockWidgets(dock))]
    return max(h.width() if orient == Qt.Horizontal else h.height() for h in hints)


def squeezed_into(wanted: list[tuple[int, int]], room: int) -> list[int]:
    """``(pixels, least)`` wanted by each dock, fitted into ``room``: the parts over each
    dock's least give way first, in proportion; where even the leasts do not fit, each dock
    gets the same part of its least."""
    leasts = sum(least for _, least in wanted)
    if leasts >= room:
        return [max(1, least * room // max(leasts, 1)) for _, least in wanted]
    over = sum(px - least for px, least in wanted)
    return [least + (px - least) * (room - leasts) // max(over, 1) for px, least in wanted]


class DockShares:
    """Each side dock's share of the window, applied at the first start, after Reset layout,
    and whenever the window grows while a dock is squeezed below ``RECOVER_BELOW`` of it."""

    def __init__(self, window: QMainWindow, shares: list[tuple[QDockWidget, Qt.Orientation, float, int]]):
        self.window, self.shares = window, shares
        self._last = window.size()
        self._shrank = False
        self._timer = QTimer(window, singleShot=True, interval=RECOVER_MS)
        self._timer.timeout.connect(self.recover)
        self.default_state = window.saveState()  # the arrangement Reset layout goes back to

    def set_least(self, dock: QDockWidget, pixels: int) -> None:
        """``dock`` is given at least ``pixels`` (its contents' comfortable size, once made),
        where the window has the room; a smaller window still squeezes it."""
        self.shares = [(d, o, share, max(least, pixels) if d is dock else least)
                       for d, o, share, least in self.shares]

    def targets(self) -> list[tuple[QDockWidget, Qt.Orientation, int]]:
        """(dock, direction, pixels) each dock should have in the current window."""
        return [(dock, orient, px) for dock, orient, px, _least in self._wanted()]

    def _wanted(self) -> list[tuple[QDockWidget, Qt.Orientation, int, int]]:
        """(dock, direction, pixels, least) of each dock: its share, never under its least
        (what its contents need: Qt would take it from the other docks instead)."""
        size = self.window.size()
        wanted = []
        for dock, orient, share, least in self.shares:
            least = max(least, _least(self.window, dock, orient))
            extent = size.width() if orient == Qt.Horizontal else size.height()
            wanted.append((dock, orient, max(least, int(extent * share)), least))
        return wanted

    def apply(self, only_squeezed: bool = False) -> None:
        """Give the docks their shares (``only_squeezed``: only those well under theirs)."""
        fit_titles(self.window)  # (tab groups may have changed: docks made, moved, restored)
        for orient in (Qt.Horizontal, Qt.Vertical):
            wants = [(d, px, least) for d, o, px, least in self._wanted() if o == orient and self._docked(d)]
            room = self._room(orient)
            docked = [(d, px) for d, px, _ in wants]
            if sum(px for _, px in docked) > room > 0:  # a small window: the docks give way
                docked = list(zip([d for d, _, _ in wants],
                                  squeezed_into([(px, least) for _, px, least in wants], room),
                                  strict=True))
            chosen = [(d, px) for d, px in docked
                      if not only_squeezed or self._extent(d, orient) < px * RECOVER_BELOW]
            if chosen:
                self.window.resizeDocks([d for d, _ in chosen], [px for _, px in chosen], orient)

    def squeezed(self) -> list[QDockWidget]:
        """The docked, visible docks well under their share."""
        return [d for d, o, px in self.targets()
                if self._docked(d) and self._extent(d, o) < px * RECOVER_BELOW]

    def window_resized(self) -> None:
        """Call from resizeEvent: once resizing stops, squeezed docks recover if it grew; if it
        shrank, docks left well over their share give it back (Qt takes a shrinking window's
        pixels from the centre first: its tab bars and graph were squeezed, the docks not)."""
        size = self.window.size()
        grew = size.width() > self._last.width() or size.height() > self._last.height()
        self._shrank = size.width() < self._last.width() or size.height() < self._last.height()
        self._last = size
        if grew or self._shrank:
            self._timer.start()

    def oversized(self) -> list[QDockWidget]:
        """The docked, visible docks well over their share (more than ``OVER_SHARE`` of it)."""
        return [d for d, o, px in self.targets()
                if self._docked(d) and self._extent(d, o) > px * OVER_SHARE]

    def recover_soon(self) -> None:
        """Recover squeezed docks once the window's layout has settled (after a restore)."""
        self._timer.start()

    def recover(self) -> None:
        """Give squeezed docks their share back (now); after a shrink that left docks well
        over theirs, every dock its share."""
        self._timer.stop()
        shrank, self._shrank = self._shrank, False
        self.apply(only_squeezed=not (shrank and self.oversized()))

    def reset(self) -> None:
        """Every dock back to its first place and share, all shown and docked."""
        self.window.restoreState(self.default_state)
        for dock in self.window.findChildren(QDockWidget):
            dock.setFloating(False)
        self.apply()
        self.tidy_soon()

    def tidy_soon(self) -> None:
        """Hide the tab bars Qt left behind (stale_tab_bars) once the layout has been applied."""
        QTimer.singleShot(0, self.window, lambda: hide_stale_tab_bars(self.window))

    def _room(self, orient: Qt.Orientation) -> int:
        """Pixels the docks of ``orient`` may share: the window less the central widget's least
        (across: less the least of the docks above and below it, their tab titles whole)."""
        central = self.window.centralWidget()
        least = central.minimumSizeHint() if central is not None else QSize()
        if orient == Qt.Horizontal:
            below = [_least(self.window, d, orient) for d in self.window.findChildren(QDockWidget)
                     if self._docked(d) and self.window.dockWidgetArea(d) in
                     (Qt.TopDockWidgetArea, Qt.BottomDockWidgetArea)]
            return self.window.width() - max(least.width(), *below, 0) - 16
        return self.window.centralWidget().height() + sum(
            d.height() for d, o, _s, _l in self.shares if o == orient and self._docked(d)) \
            - max(least.height(), CENTRAL_LEAST) - 8

    def _docked(self, dock: QDockWidget) -> bool:
        return dock.isVisible() and not dock.isFloating()

    @staticmethod
    def _extent(dock: QDockWidget, orient: Qt.Orientation) -> int:
        return dock.width() if orient == Qt.Horizontal else dock.height()
