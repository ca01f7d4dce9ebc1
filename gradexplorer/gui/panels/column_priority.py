"""Columns by priority: a narrow table or tree shows its most useful columns whole in view (name,
norm, max |g| first) and every other column after them, reached by scrolling sideways (hiding
them by width left a 1024×700 window no way to the update ratio, NaN/Inf, shape or numel, and a
hook badge's growth hid the Hook column); the header's right-click menu shows or hides any
column."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QAbstractItemView, QMenu

NAME_LEAST = 96  # the first (name) column never narrower than this while others are shown
ESSENTIAL = 2  # columns after the name kept in view beside a narrow name (norm and max |g|)


class ColumnPriority(QObject):
    """Sizes ``view``'s columns as it is resized; ``priority`` lists the columns most useful
    first (the first one, the name, always shown; the next ``ESSENTIAL`` kept in view beside
    it); ``widths`` is each column's natural width, set by ``remember`` after the view sized its
    columns to their contents. The user hides or shows the others from the header's menu."""

    def __init__(self, view: QAbstractItemView, priority: list[int], titles: list[str]) -> None:
        super().__init__(view)
        self.view, self.priority, self.titles = view, list(priority), list(titles)
        self.widths = {c: view.header().sectionSize(c) if hasattr(view, "header")
                       else view.horizontalHeader().sectionSize(c) for c in priority}
        self.chosen: dict[int, bool] = {}  # column -> shown or hidden by the user
        self.name_least = NAME_LEAST  # a tree adds its deepest row's indentation
        header = self.header()
        header.setContextMenuPolicy(Qt.CustomContextMenu)
        header.customContextMenuRequested.connect(self._menu)
        view.setHorizontalScrollMode(QAbstractItemView.ScrollPerPixel)  # a sideways scroll, smooth
        for place, column in enumerate(priority[:1 + ESSENTIAL]):  # in view: right after the name
            header.moveSection(header.visualIndex(column), place)
        view.viewport().installEventFilter(self)

    def header(self):
        view = self.view
        return view.header() if hasattr(view, "header") else view.horizontalHeader()

    def remember(self, widths: dict[int, int] | None = None) -> None:
        """Natural widths now (``widths``, or the columns' current sizes), then fit."""
        header = self.header()
        self.widths = widths or {c: header.sectionSize(c) or self.widths.get(c, 60)
                                 for c in self.priority}
        self.fit()

    def shown_columns(self) -> list[int]:
        """The columns on show, by priority: all but those the user hid."""
        return [c for c in self.priority if self.chosen.get(c) is not False]

    def fit(self) -> None:
        """Show the chosen columns at their natural widths; the name column as wide as its
        names where norm and max |g| stay in view beside it, and never narrower than
        ``name_least`` (names that read alike) while norm stays in view: the rest is a sideways
        scroll away."""
        width = self.view.viewport().width()
        shown = self.shown_columns()
        header = self.header()
        for column in self.priority:
            header.setSectionHidden(column, column not in shown)
            if column in shown and column != self.priority[0]:
                header.resizeSection(column, self.widths.get(column, 60))
        name = self.priority[0]
        beside = sum(self.widths.get(c, 60) for c in shown[1:1 + ESSENTIAL])
        first = self.widths.get(shown[1], 60) if len(shown) > 1 else 0
        natural = self.widths.get(name, self.name_least)
        least = min(natural, self.name_least)  # names that read apart
        size = min(natural, width - beside)
        if size < least:  # not beside norm and max |g|: beside norm, the next column wholly out
            size = width - first if least <= width - first else least  # of view, never half in it
        header.resizeSection(name, max(size, min(natural, NAME_LEAST)))

    def eventFilter(self, _obj, event) -> bool:  # noqa: N802 - Qt API
        if event.type() == QEvent.Resize:
            self.fit()
        return False

    def _menu(self, pos) -> None:
        menu = QMenu(self.view)
        header = self.header()
        for column in self.priority[1:]:
            action = menu.addAction(self.titles[column])
            action.setCheckable(True)
            action.setChecked(not header.isSectionHidden(column))
            action.toggled.connect(lambda on, c=column: self.choose(c, on))
        menu.popup(header.mapToGlobal(pos))
        self.menu = menu

    def choose(self, column: int, shown: bool) -> None:
        """The user shows or hides ``column`` (whatever the width)."""
        self.chosen[column] = shown
        self.fit()
