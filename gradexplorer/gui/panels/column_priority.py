"""Columns by priority: a narrow table or tree shows its most useful columns whole (name,
norm, max |g| first) instead of squeezing all of them; the header's right-click menu shows or
hides any column, and that choice wins over the width."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QAbstractItemView, QMenu

NAME_LEAST = 96  # the first (name) column never narrower than this while others are shown
NAME_ROOMY = 240  # ...and as wide as its names (up to this) before the optional columns show
ESSENTIAL = 2  # columns after the name shown beside a narrow name (norm and max |g|)


class ColumnPriority(QObject):
    """Hides and shows ``view``'s columns as it is resized; ``priority`` lists the columns
    most useful first (the first one, the name, always shown); ``widths`` is each column's
    natural width, set by ``remember`` after the view sized its columns to their contents."""

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

    def shown_columns(self, width: int) -> list[int]:
        """The columns that fit ``width`` pixels, by priority (and the user's choices)."""
        name, *rest = self.priority
        natural = self.widths.get(name, self.name_least)
        used = min(natural, self.name_least)
        shown = [name]
        fits = True
        for rank, column in enumerate(rest):
            wanted = self.chosen.get(column)
            if wanted is False:
                continue
            if rank == ESSENTIAL:  # the optional columns only once the names are readable
                used += max(0, min(natural, NAME_ROOMY) - min(natural, self.name_least))
            fits = fits and used + self.widths.get(column, 60) <= width
            if fits or wanted:
                shown.append(column)
                used += self.widths.get(column, 60)
        return shown

    def fit(self) -> None:
        """Show the columns that fit the view's width; the name column takes what is left."""
        width = self.view.viewport().width()
        shown = set(self.shown_columns(width))
        header = self.header()
        for column in self.priority:
            header.setSectionHidden(column, column not in shown)
            if column in shown and column != self.priority[0]:
                header.resizeSection(column, self.widths.get(column, 60))
        name = self.priority[0]
        others = sum(self.widths.get(c, 60) for c in shown if c != name)
        natural = self.widths.get(name, self.name_least)
        header.resizeSection(name, max(min(natural, width - others), min(natural, self.name_least)))

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
