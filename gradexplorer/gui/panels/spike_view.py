"""Spike forensics and run divergence in the app: a ranking list that opens the model there.

``SpikePanel`` (the "Spikes" dock) lists the ranking of the event picked on the curves (by
onset: the first parameter to leave its band first, ties by excursion) or of the divergence
of two runs (by relative gap). Showing one (``show_event``/``show_divergence``): the step is
picked (a line on the curves, the ledger's details of that step), the graph is tinted by rank
(first to move = hottest; held until the window leaves that step), and the first parameter is
selected everywhere at that step (the selection's ``step``: every view shows it). Clicking a
row selects that parameter; "Live" (End) returns every view to the newest step. Each row's "line"
is where the model's code uses the parameter (the source line of the op that takes it).
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from gradexplorer.core.diagnose.spikes import factor_text, owner
from gradexplorer.core.graph.style import where_used
from gradexplorer.core.stats.records import ParamStats
from gradexplorer.gui.text.number_text import format_number

NAME = Qt.UserRole + 1
HEADING_HEIGHT = 48  # pixels of the event's summary shown before it scrolls


def rank_heat(names: list[str], ranked: list[str],
              values: list[float] | None = None) -> dict[str, ParamStats]:
    """Stand-in statistics whose "norm" is the heat the graph's tint draws (as it draws norms):
    ``values`` (a divergence's gaps) or else each rank's (the first ranked hottest, 10^n … 10);
    unranked parameters palest (0)."""
    n = len(ranked)
    heat = dict(zip(ranked, values, strict=True)) if values is not None else \
        {name: 10.0 ** (n - i) for i, name in enumerate(ranked)}
    return {name: ParamStats(name, (1,), 1, True, norm=heat.get(name, 0.0)) for name in names}


def batch_text(batch, shown: int = 3) -> str:
    """A batch's ids, short: ``sample-9600, sample-9601, sample-9602 … (32 ids)``."""
    if isinstance(batch, (list, tuple)) and len(batch) > shown:
        return ", ".join(map(str, batch[:shown])) + f" … ({len(batch)} ids)"
    if isinstance(batch, (list, tuple)):
        return ", ".join(map(str, batch))
    text = str(batch)
    return text if len(text) <= 80 else text[:79] + "…"


class SpikePanel(QWidget):
    """The ranking list of the picked event or divergence; wired to a main window by
    ``StepForensics`` (gui/window/step_forensics.py)."""

    def __init__(self, window, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.window = window
        self.shown = None  # the SpikeEvent or Divergence shown
        self.heading = QLabel("Click a spike marker (▲) on the loss or norm curve.")
        self.heading.setWordWrap(True)
        self.heading.setTextFormat(Qt.PlainText)  # parameter names shown as written, never markup
        self.heading.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.live_button = QPushButton("Live")
        self.live_button.setToolTip("Every view back to the newest step, the graph tinted by its "
                                    "gradient norms again (End)")
        self.live_button.setEnabled(False)
        self.live_button.clicked.connect(lambda: window.selection.go_live("spikes"))
        self.ranking = QTreeWidget()
        self.ranking.setRootIsDecorated(False)
        self.ranking.setMinimumHeight(48)
        self.ranking.setAlternatingRowColors(True)
        self.ranking.setHeaderLabels(["#", "parameter", "figure", "onset", "excursion", "line"])
        self.ranking.itemClicked.connect(self._row_clicked)
        heading_area = QScrollArea()  # a long summary scrolls; the dock stays short
        heading_area.setWidget(self.heading)
        heading_area.setWidgetResizable(True)
        heading_area.setFrameShape(QScrollArea.NoFrame)
        heading_area.setMaximumHeight(HEADING_HEIGHT)
        top = QHBoxLayout()
        top.addWidget(heading_area, 1)
        top.addWidget(self.live_button, 0, Qt.AlignTop)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 2, 4, 2)
        layout.addLayout(top)
        layout.addWidget(self.ranking, 1)
        self._held = False
        self._step: int | None = None  # the step of what is shown
        self._generation = None  # the timeline's ledger generation of what is shown
        window.controller.timeline.changed.connect(self._forget_if_new_run)
        window.selection.step_changed.connect(self._step_changed)

    # -- what is shown ------------------------------------------------------------------
    def show_event(self, event) -> None:
        """A spike event: its ranking by onset, at its first flagged step."""
        batch = f" · batch {batch_text(event.batch)}" if event.batch is not None else ""
        self.ranking.setHeaderLabels(["#", "parameter", "figure", "onset", "excursion", "line"])
        rows = [(r["name"], r["figure"], f"step {r['onset']}", factor_text(r["factor"]))
                for r in event.ranking]
        self._show(event, f"Spike {event.summary()}{batch}", event.step, rows)  # heat by rank

    def show_divergence(self, divergence, name_a: str = "A", name_b: str = "B") -> None:
        """Where two runs part: the parameters ranked by relative gap at the first step."""
        self.ranking.setHeaderLabels(["#", "parameter", "figure", f"{name_a} / {name_b}", "gap",
                                         "line"])
        if not divergence.diverged:
            self._show(divergence, f"Runs {name_a} and {name_b} stay within tol "
                       f"{divergence.tol:g} over {len(divergence.compared)} common steps", None, [])
            return
        rows = [(r["name"], r["figure"], f"{format_number(r['a'])} / {format_number(r['b'])}",
                 format_number(r["gap"], 3)) for r in divergence.ranking]
        signals = "; ".join(f"{k} gap {format_number(v['gap'], 3)}"
                            for k, v in divergence.signals.items())
        self._show(divergence, f"Runs {name_a} and {name_b} part at step {divergence.step} "
                   f"(tol {divergence.tol:g}; {signals}); first: "
                   f"{divergence.ranking[0]['name'] if divergence.ranking else '—'}",
                   divergence.step, rows, [r["gap"] for r in divergence.ranking])

    def _forget_if_new_run(self) -> None:
        """Another model or run took over the timeline: what is shown no longer applies."""
        if self.shown is not None and \
                self.window.controller.timeline.ledger.generation != self._generation:
            self.clear()

    def clear(self) -> None:
        """Show nothing; the graph's tint follows the latest norms again."""
        self.shown, self._generation = None, None
        self.heading.setText("Click a spike marker (▲) on the loss or norm curve.")
        self.ranking.clear()
        self.live_tint()

    def _show(self, shown, heading: str, step: int | None, rows: list[tuple],
              heat: list[float] | None = None) -> None:
        self.shown = shown
        self._generation = self.window.controller.timeline.ledger.generation
        self.heading.setText(heading)
        self.ranking.clear()
        graph = self.window.graph_panel.graph
        for i, row in enumerate(rows, start=1):
            line = where_used(graph, param=row[0])
            item = QTreeWidgetItem([str(i), *row, line])
            item.setData(0, NAME, row[0])
            item.setToolTip(1, row[0])
            item.setToolTip(5, line)
            self.ranking.addTopLevelItem(item)
        for column in range(6):
            self.ranking.resizeColumnToContents(column)
        w = self.window
        self._step = step
        ranked = [row[0] for row in rows]
        if ranked:
            self.hold_tint(rank_heat([r[0] for r in w.table.table.rows], ranked, heat))
            first = ranked[0]  # the whole window at the event's step
            w.selection.select(param=first, module=owner(first), source="spikes", step=step)
            if w.graph_panel.drawing is not None:
                w.graph_panel.zoom_to_selection()
            self.ranking.setCurrentItem(self.ranking.topLevelItem(0))
        else:
            w.selection.select_step(step, "spikes")

    def _step_changed(self, step) -> None:
        """The window moved to another step (or back to live): the ranking's tint goes."""
        self.live_button.setEnabled(step is not None)
        if self._held and step != self._step:
            self.live_tint()

    # -- the graph's tint -----------------------------------------------------------------
    def holds_tint(self) -> bool:
        """Whether the graph shows the ranking's tint (held against the step's norms)."""
        return self._held

    def hold_tint(self, stats: dict) -> None:
        """Tint the graph with ``stats`` and hold it against the live redraws."""
        w = self.window
        if not self._held:
            w.controller.timeline.changed.disconnect(w._throttles[1])
            self._held = True
        w.graph_panel.view_state.tint = True
        w.graph_panel.set_stats(stats)
        self.live_button.setEnabled(True)

    def live_tint(self) -> None:
        """The graph tinted by the gradient norms of the step shown again."""
        w = self.window
        if self._held:
            w.controller.timeline.changed.connect(w._throttles[1])
            self._held = False
        self.live_button.setEnabled(w.selection.current.step is not None)
        w._redraw_graph_tint()

    def _row_clicked(self, item: QTreeWidgetItem, _column: int) -> None:
        name = item.data(0, NAME)
        self.window.selection.select(param=name, module=owner(name), source="spikes")
