"""Every parameter's histogram at once: a filtered, ranked grid of small multiples.

A QListView in icon mode over a list model of names: Qt lays out and paints only the tiles in
view, so 1,000+ parameters scroll smoothly. Each tile: the parameter's name, its latest
histogram (bars scaled to the tile), its norm, and a red frame and count when its gradient
holds NaN/Inf. A click selects the parameter everywhere; a selection made elsewhere is shown
and scrolled to.
"""

from __future__ import annotations

import math

import numpy as np
from PySide6.QtCore import QAbstractListModel, QModelIndex, QRect, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPen
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLineEdit,
    QListView,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from gradexplorer.core.stats.ranking import RANKINGS, rank_parameters
from gradexplorer.gui.graph.legend import reads_whole
from gradexplorer.gui.models.selection import step_caption
from gradexplorer.gui.panels.elided_label import ElidedLabel
from gradexplorer.gui.text.name_elide import elide_to_width, shared_forms
from gradexplorer.gui.text.number_text import gradient_number, update_ratio_text
from gradexplorer.gui.theme import ACCENT, ALARM, SELECTION

TILE = QSize(168, 96)
NAME_ROLE = Qt.UserRole + 1
NORM_ROLE = Qt.UserRole + 2  # the tile's norm line: "‖g‖ 1.23", "‖g‖ NaN", "no gradient"


class GridModel(QAbstractListModel):
    """The names shown, in order, and the step's figures and histograms they are drawn from."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []
        self.shared: frozenset[str] = frozenset()  # shortened forms two tiles share: never drawn
        self.params: dict = {}
        self.histograms: dict = {}
        self.step: int | None = None  # the step they are of

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: N802 - Qt API
        return 0 if parent.isValid() else len(self.names)

    def data(self, index: QModelIndex, role: int = Qt.DisplayRole):
        if not index.isValid():
            return None
        name = self.names[index.row()]
        if role in (Qt.DisplayRole, NAME_ROLE):
            return name
        s = self.params.get(name)
        if role == NORM_ROLE:
            return "no gradient" if s is None or not s.has_grad else f"‖g‖ {gradient_number(s, s.norm)}"
        if role == Qt.ToolTipRole:
            if s is None or not s.has_grad:
                return f"{name}: no gradient"
            return (f"{name}  {list(s.shape)}\nnorm {gradient_number(s, s.norm)} · max |g| "
                    f"{gradient_number(s, s.abs_max)} · update {update_ratio_text(s.update_ratio)}\n"
                    f"NaN {s.nan_count} · Inf {s.inf_count}")
        return None

    def show(self, names: list[str], params: dict, histograms: dict) -> None:
        if names == self.names:
            self.params, self.histograms = params, histograms
            if names:
                self.dataChanged.emit(self.index(0), self.index(len(names) - 1))
            return
        self.beginResetModel()
        self.names, self.params, self.histograms = names, params, histograms
        self.shared = shared_forms(names)
        self.endResetModel()


class TileDelegate(QStyledItemDelegate):
    """Paints one tile from the model's figures (nothing is stored per tile)."""

    def __init__(self, model: GridModel) -> None:
        super().__init__()
        self.model = model

    def sizeHint(self, option, index) -> QSize:  # noqa: N802 - Qt API
        return TILE

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex) -> None:
        name = index.data(NAME_ROLE)
        s = self.model.params.get(name)
        h = self.model.histograms.get(name)
        r = option.rect.adjusted(3, 3, -3, -3)
        painter.save()
        palette = option.palette
        painter.fillRect(r, palette.base())
        bad = s is not None and bool((s.nan_count or 0) + (s.inf_count or 0))
        selected = bool(option.state & QStyle.State_Selected)
        frame = QColor(SELECTION if selected else ALARM if bad else palette.mid().color())
        painter.setPen(QPen(frame, 2 if selected or bad else 1))
        painter.drawRect(r)
        text = palette.text().color()
        painter.setPen(text)
        font = painter.font()
        font.setPointSizeF(max(7.0, font.pointSizeF() * 0.85))
        painter.setFont(font)
        line = painter.fontMetrics().height()
        top = QRect(r.left() + 4, r.top() + 2, r.width() - 8, line)
        painter.drawText(top, Qt.AlignLeft | Qt.AlignVCenter,
                         elide_to_width(name, painter.fontMetrics().horizontalAdvance, top.width(),
                                        self.model.shared))
        bottom = QRect(r.left() + 4, r.bottom() - line - 1, r.width() - 8, line)
        painter.drawText(bottom, Qt.AlignLeft | Qt.AlignVCenter, index.data(NORM_ROLE))
        if s is not None and s.has_grad:
            if bad:
                painter.setPen(QColor(ALARM))
                painter.drawText(bottom, Qt.AlignRight | Qt.AlignVCenter,
                                 f"NaN {s.nan_count} Inf {s.inf_count}")
        bars = QRect(r.left() + 4, top.bottom() + 3, r.width() - 8, bottom.top() - top.bottom() - 6)
        if h is not None and h.counts.size and h.counts.max() > 0:
            counts = np.asarray(h.counts, dtype=np.float64)
            heights = counts / counts.max() * bars.height()
            width = bars.width() / len(counts)
            colour = QColor(ACCENT)
            for i, height in enumerate(heights):
                if height > 0:
                    x = bars.left() + i * width
                    painter.fillRect(int(x), int(bars.bottom() - max(1.0, height)) + 1,
                                     max(1, math.ceil(width) - (1 if width > 3 else 0)),
                                     int(max(1.0, height)), colour)
        painter.restore()


class HistogramGrid(QWidget):
    """Filter box, ranking chooser and the grid; ``refresh()`` redraws from the timeline."""

    def __init__(self, selection, timeline, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.selection, self.timeline = selection, timeline
        self.filter = QLineEdit(placeholderText="filter parameters…", clearButtonEnabled=True)
        self.ranking = QComboBox()
        self.ranking.addItems(list(RANKINGS))
        reads_whole(self.ranking)  # the sort's name whole (it was clipped: 'model ord'), the filter gives way
        self.filter.setMinimumWidth(50)
        self.count = ElidedLabel("", minimum=30)  # "6 of 6 · step 50 of 60" never widens the dock
        self.csv_button = QToolButton(text="CSV…")  # a tool button's chrome: the Model dock beside
        self.csv_button.setToolButtonStyle(Qt.ToolButtonTextOnly)  # keeps its 320 px at 1024×700
        self.csv_button.setToolTip("Save the parameters shown, in this order, with their figures, as CSV")
        self.csv_button.clicked.connect(self.save_csv)
        self.model = GridModel()
        self.view = QListView()
        self.view.setViewMode(QListView.IconMode)
        self.view.setResizeMode(QListView.Adjust)
        self.view.setUniformItemSizes(True)
        self.view.setMovement(QListView.Static)
        self.view.setGridSize(TILE)
        self.view.setSelectionMode(QListView.SingleSelection)
        self.view.setModel(self.model)
        self.view.setItemDelegate(TileDelegate(self.model))
        bar = QHBoxLayout()
        bar.addWidget(self.filter, 1)
        bar.addWidget(self.ranking)
        bar.addWidget(self.csv_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addLayout(bar)
        layout.addWidget(self.count)  # a line of its own: "148 of 148 · lr-1e-4" read whole at
        # 1024×700 (beside the filter it had 50 pixels: "148 …")
        layout.addWidget(self.view, 1)
        self.filter.textChanged.connect(self.refresh)
        self.ranking.currentTextChanged.connect(self.refresh)
        self.view.clicked.connect(self._clicked)
        selection.changed.connect(self.show_selection)
        selection.step_changed.connect(self.refresh)

    def shown_step(self):
        """The StepGradients the tiles show: the newest histogram step at or before the
        selection's step (figures and histograms of one step, never step 33's norm over step
        30's histogram), else the selection's step itself."""
        step = self.selection.current.step
        recorded = self.timeline.histogram_steps_at(step, count=1)
        return recorded[-1] if recorded else self.timeline.gradients_at(step)

    def refresh(self, *_args) -> None:
        """Redraw from the step shown (``shown_step``), in the chosen order and filter; its
        step said when it is not the newest."""
        shown = self.shown_step()
        params = shown.params if shown is not None else {}
        histograms = shown.histograms if shown is not None else {}
        names = rank_parameters(params, self.ranking.currentText(), self.filter.text())
        self.model.show(names, params, histograms)
        self.model.step = None if shown is None else shown.step
        caption = step_caption(self.model.step, self.timeline.newest_step)
        run = getattr(self.timeline, "run_name", None)  # runs overlaid: the reference run's
        said = [text for text in (caption, run) if text]
        self.count.setText(f"{len(names)} of {len(params)}" + "".join(f" · {t}" for t in said))
        self.count.setToolTip(f"the tiles show run {run}, the reference run (Runs dock)" if run
                              else "parameters shown of all")
        self.show_selection(self.selection.current)

    def save_csv(self) -> str | None:
        """Ask for a file and write the parameters shown (filter and order as on screen); a
        NaN/Inf gradient's norm and max |g| are written ``nan``/``inf``."""
        from gradexplorer.core.stats.records import STAT_FIELDS
        from gradexplorer.gui.csv_export import save_csv

        params, step = self.model.params, self.model.step  # the step the tiles show
        rows = [(step, n, *(params[n].whole(f) for f in STAT_FIELDS)) for n in self.model.names]
        return save_csv(self, "parameters", ["step", "parameter", *STAT_FIELDS], rows)

    def _clicked(self, index: QModelIndex) -> None:
        name = index.data(NAME_ROLE)
        self.selection.select(param=name, module=name.rpartition(".")[0], source="grid")

    def show_selection(self, selection) -> None:
        """Highlight and scroll to the selected parameter, when it is in the grid."""
        name = getattr(selection, "param", None)
        if name not in self.model.names:
            self.view.clearSelection()
            return
        index = self.model.index(self.model.names.index(name))
        self.view.setCurrentIndex(index)
        self.view.scrollTo(index)
