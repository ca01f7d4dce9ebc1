"""The "Per-sample" dock: each step's per-sample gradient norms (docs/per_sample.md).

A check box turns them on or off (a job between steps attaches the session observer,
``gui/training/per_sample_jobs.py``), with the loss's reduction; the dock shows the newest
step's distribution of per-sample norms (a histogram) and its largest samples with their
largest modules, and names the modules that have no per-sample norm. The figures are read
from the observer on a timer while the dock is shown (one reference, replaced whole by the
training thread after each step).
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QSplitter,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from gradexplorer.core.session.batch_ids import batch_text

POLL_MS = 250
HEADERS = ("rank", "sample", "norm", "largest modules")


class PerSamplePanel(QWidget):
    """The dock's view; ``docked(window)`` makes it and its dock in ``window``."""

    def __init__(self, controller, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.controller = controller
        self.observer = None
        self.shown_step: int | None = None
        self.toggle = QCheckBox("Per-sample gradient norms")
        self.toggle.setToolTip("each sample's gradient norm, from each layer's input and output "
                               "gradient (no per-sample gradients in memory); a step costs more "
                               "(README: per-sample norms)")
        self.reduction = QComboBox()
        self.reduction.addItems(["mean", "sum"])
        self.reduction.setToolTip("how the loss combines the samples' losses: mean (the norms "
                                  "are those of each sample's own loss) or sum")
        self.status = QLabel("off: tick to measure from the next step")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.plot = pg.PlotWidget()
        self.plot.setLabel("bottom", "per-sample gradient norm")
        self.plot.setLabel("left", "samples")
        self.plot.setMinimumHeight(90)
        self.bars = pg.BarGraphItem(x0=[], x1=[], height=[], brush=pg.mkBrush(30, 136, 229, 140))
        self.plot.addItem(self.bars)
        self.top = QTreeWidget()
        self.top.setHeaderLabels(list(HEADERS))
        self.top.setRootIsDecorated(False)
        row = QHBoxLayout()
        row.addWidget(self.toggle)
        row.addWidget(QLabel("loss reduction"))
        row.addWidget(self.reduction)
        row.addStretch(1)
        split = QSplitter(Qt.Horizontal)
        split.addWidget(self.plot)
        split.addWidget(self.top)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(row)
        layout.addWidget(self.status)
        layout.addWidget(split, 1)
        self.timer = QTimer(self)
        self.timer.setInterval(POLL_MS)
        self.timer.timeout.connect(self.refresh)
        self.toggle.toggled.connect(self._toggled)
        self.reduction.currentTextChanged.connect(lambda _t: self._toggled(self.toggle.isChecked()))
        controller.session.job_finished.connect(self._job_finished)

    @classmethod
    def docked(cls, window):
        """The panel in a "Per-sample" bottom dock of ``window``, tabbed with its Events: hidden
        until View → Per-sample shows it (the first layout's tabs stay as they are)."""
        panel = cls(window.controller)
        panel.dock = window._dock("Per-sample", panel, Qt.BottomDockWidgetArea)
        window.tabifyDockWidget(window.events_dock, panel.dock)
        panel.dock.hide()
        window.menus.add_view_action(panel.dock.toggleViewAction())
        return panel

    # -- on and off: jobs between steps ------------------------------------------------
    def _toggled(self, on: bool) -> None:
        from gradexplorer.gui.training import per_sample_jobs as J

        live = self.controller.session.live
        if live is None:
            return
        old, reduction = self.observer, self.reduction.currentText()
        self.controller.post(lambda: J.attach(live, reduction, old) if on else J.detach(live, old))
        self.status.setText("starting: from the next step" if on else "off")

    def _job_finished(self, result) -> None:
        from gradexplorer.gui.training.per_sample_jobs import PerSampleChanged

        if isinstance(result, PerSampleChanged):
            self.observer = result.observer
            self.shown_step = None
            if self.observer is None:
                self.timer.stop()
                return
            self.timer.start()
            unsupported = self.observer.unsupported
            if unsupported:
                self.status.setText("no per-sample norm for " + "; ".join(
                    f"{n}: {why}" for n, why in unsupported.items()))
        elif type(result).__name__ == "SessionOpened" and self.toggle.isChecked():
            self.observer = None  # the old session's observer went with it: on the new one
            self._toggled(True)

    # -- the newest step ---------------------------------------------------------------
    def refresh(self) -> None:
        last = None if self.observer is None else self.observer.last
        if last is None or last[0] == self.shown_step:
            return
        step, figures = last
        self.shown_step = step
        self.show_figures(step, figures)

    def show_figures(self, step: int, figures) -> None:
        """Draw ``figures`` (a PerSampleStep) of ``step``."""
        edges, counts = figures.histogram()
        log = bool(edges[0] > 0 and edges[-1] / edges[0] >= 10)  # log-spaced bins: drawn at
        x = np.log10(edges) if log else edges  # log10 of the norm (bars take no log axis)
        self.bars.setOpts(x0=x[:-1], x1=x[1:], height=counts)
        self.plot.setLabel("bottom", "log10 per-sample gradient norm" if log
                           else "per-sample gradient norm")
        self.plot.enableAutoRange()
        left_out = "" if not self.observer or not self.observer.unsupported else \
            f"; {len(self.observer.unsupported)} modules left out"
        batch = getattr(self.observer, "batch", None)  # its micro-batches' indices, where known
        named = (batch_text(batch[1]) if batch is not None and batch[0] == step else None) or \
            f"make_batch({step - 1})"
        self.status.setText(f"step {step} (batch {named}): {figures.summary()} "
                            f"(loss reduction {figures.reduction}){left_out}")
        self.top.clear()
        for rank, entry in enumerate(figures.top(), 1):
            modules = ", ".join(f"{n} {v:.3g}" if isinstance(v, float) else f"{n} {v}"
                                for n, v in entry["modules"].items())
            norm = entry["norm"]
            self.top.addTopLevelItem(QTreeWidgetItem([
                str(rank), str(entry["index"]),
                f"{norm:.4g}" if isinstance(norm, float) else str(norm), modules]))
        for column in range(3):
            self.top.resizeColumnToContents(column)

    def shown_counts(self) -> np.ndarray:
        """The histogram's bar heights as drawn."""
        return np.asarray(self.bars.opts["height"], dtype=float)
