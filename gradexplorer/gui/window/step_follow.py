"""The whole window at one step: the selection's ``step`` (gui/models/selection.py), and the way
back to live.

A click on a spike, a heat-map column, a ledger point or a curve point sets the selection's
step; every view then reads that step by one route, ``TimelineModel.gradients_at`` (the live
session's history and pinned spike steps, or a run directory's own read of the step). Here:
the table, tree, details pane and graph tint redrawn at that step, "viewing step 401 of 1600"
in the status bar and above the table, and the "Live" action (End, and a button beside that
line in the status bar: a toolbar's end is cut off in a 1024-px window) that returns every view
to the newest step. A new model or run starts live.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QLabel, QToolButton

from gradexplorer.gui.models.selection import step_caption
from gradexplorer.gui.theme import SELECTION

LIVE_KEY = "End"


MIN_LABEL_WIDTH = 60  # px: what the step labels keep when the window is narrow


class StepFollow:
    """Made by the main window; ``shown()`` is the record every window-level view draws."""

    def __init__(self, window) -> None:
        self.window = window
        selection, timeline = window.selection, window.controller.timeline
        self.live_action = QAction("Live", window)
        self.live_action.setShortcut(QKeySequence(LIVE_KEY))
        self.live_action.setShortcutContext(Qt.WindowShortcut)
        self.live_action.setToolTip(f"Every view back to the newest step ({LIVE_KEY})")
        self.live_action.setEnabled(False)
        self.live_action.triggered.connect(lambda: selection.go_live("live"))
        window.addAction(self.live_action)  # End whatever has focus in the window
        self.status_label = self._label()  # in the status bar, left of its permanent labels
        self.live_button = QToolButton()
        self.live_button.setDefaultAction(self.live_action)
        self.live_button.hide()
        window.status.insertPermanentWidget(0, self.status_label)
        window.status.insertPermanentWidget(1, self.live_button)
        self.table_label = self._label()  # above the table: its figures are of this step
        window.model_filter.layout().addWidget(self.table_label)
        selection.step_changed.connect(self._step_changed)
        timeline.started.connect(lambda: selection.go_live("reset"))  # a new model or run
        timeline.changed.connect(self._say_step)  # "of N" grows while training

    @staticmethod
    def _label() -> QLabel:
        label = QLabel("")
        label.setTextFormat(Qt.PlainText)
        label.setStyleSheet(f"color: {SELECTION}; font-weight: bold")
        label.setToolTip(f"the step every view shows; {LIVE_KEY} or Live (toolbar): the newest")
        label.setMinimumWidth(MIN_LABEL_WIDTH)  # may be cut, never widens the window it appears in
        label.hide()
        return label

    @property
    def step(self) -> int | None:
        """The step the window shows (None: live)."""
        return self.window.selection.current.step

    def shown(self):
        """The StepGradients the window shows: the selection's step, or the newest."""
        return self.window.controller.timeline.gradients_at(self.step)

    def caption(self) -> str:
        """``step 401 of 1600`` while the window shows a step that is not the newest, else ""."""
        shown = self.shown()
        return step_caption(None if shown is None else shown.step,
                            self.window.controller.timeline.newest_step)

    def _say_step(self) -> None:
        caption = self.caption() if self.step is not None else ""
        self.live_action.setEnabled(self.step is not None)
        self.live_button.setVisible(bool(caption))
        for label, text in ((self.status_label, f"viewing {caption} · {LIVE_KEY}:"),
                            (self.table_label, f"@ {caption}")):
            label.setText(text if caption else "")
            label.setVisible(bool(caption))

    def _step_changed(self, _step) -> None:
        """Every window-level view at the new step, now."""
        window = self.window
        self._say_step()
        window._redraw_parameters()
        spikes = window._plots.forensics.spike_panel if window._plots is not None else None
        if spikes is None or not spikes.holds_tint():
            window._redraw_graph_tint()
