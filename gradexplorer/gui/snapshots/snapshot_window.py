"""A window that browses one snapshot, or compares two side by side, without the model."""

from __future__ import annotations

from html import escape
from pathlib import Path

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import QLabel, QMainWindow, QSplitter, QVBoxLayout, QWidget

from gradexplorer.core.snapshot import compare_snapshots, read_snapshot
from gradexplorer.gui.plots.flow_chart import FlowPanel, share_span
from gradexplorer.gui.plots.histogram_plot import HistogramPlot
from gradexplorer.gui.snapshots.snapshot_table import SnapshotTable
from gradexplorer.gui.window.window_fit import screen_size


def describe(snapshot) -> str:
    """One HTML line: path, step, model, device, hooks."""
    m = snapshot.manifest
    hooks = ", ".join(f"{h['module'] or '<root>'}={h['action']}" for h in m.get("hooks", [])) or "none"
    model = m.get("model") or "?"
    return (f"<b>{escape(snapshot.path.name)}</b> · step {snapshot.step} · model {escape(str(model))}"
            f" · device {escape(str(m.get('device', '?')))} · hooks: {escape(hooks)}")


class SnapshotWindow(QMainWindow):
    """Reads with core's ``read_snapshot``/``compare_snapshots``; UserErrors reach the caller."""

    def __init__(self, path: str | Path, other: str | Path | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.a = read_snapshot(path)
        self.b = read_snapshot(other) if other is not None else None
        self.comparison = compare_snapshots(self.a, self.b) if self.b is not None else None
        self.setWindowTitle(f"gradexplorer — snapshot {self.a.path}"
                            + (f" vs {self.b.path}" if self.b is not None else ""))
        self.table = SnapshotTable()
        self.histogram = HistogramPlot()
        comparing = self.b is not None
        self.flow_panel = FlowPanel(title="gradient flow · A" if comparing else "gradient flow")
        self.flow = self.flow_panel.chart
        self.flow_b_panel = FlowPanel(title="gradient flow · B") if comparing else None
        self.flow_b = self.flow_b_panel.chart if comparing else None
        self._build()
        self.table.itemSelectionChanged.connect(self.show_selected)
        if self.comparison is not None:
            self.table.show_comparison(self.comparison)
        else:
            self.table.show_snapshot(self.a)
        self.flow.show_stats(self.a.stats)
        if self.flow_b is not None:
            self.flow_b.show_stats(self.b.stats)
            share_span([self.flow, self.flow_b])  # A and B on one |g| scale
            self.histogram.add_legend("B (filled)", "A (outline)")
            a_bar, b_bar = self.flow_panel.scroll, self.flow_b_panel.scroll
            a_bar.valueChanged.connect(b_bar.setValue)  # the same rows side by side
            b_bar.valueChanged.connect(a_bar.setValue)
        self.show_selected()
        self.resize(screen_size(self, QSize(1200, 760)))  # shrunk to a small screen

    def _build(self) -> None:
        header = QLabel(describe(self.a) + ("<br>vs " + describe(self.b) if self.b else ""))
        header.setObjectName("details")
        header.setTextInteractionFlags(Qt.TextSelectableByMouse)
        plots = QSplitter(Qt.Vertical)
        plots.addWidget(self.histogram)
        flows = QSplitter(Qt.Horizontal)
        flows.addWidget(self.flow_panel)
        if self.flow_b_panel is not None:
            flows.addWidget(self.flow_b_panel)
        plots.addWidget(flows)
        split = QSplitter(Qt.Horizontal)
        split.addWidget(self.table)
        split.addWidget(plots)
        split.setSizes([520, 680])
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.addWidget(header)
        layout.addWidget(split, 1)
        self.setCentralWidget(central)

    def show_selected(self) -> None:
        """Histogram of the selected parameter (B drawn over A, A ghosted, when comparing)."""
        name = self.table.current_name()
        if name is None or name not in self.a.stats:
            self.histogram.show_histograms(None, None, None, None)
            return
        if self.b is not None and name in self.b.stats:
            self.histogram.show_histograms(f"{name} (B over A)", self.b.histograms.get(name),
                                           self.a.histograms.get(name), self.b.stats[name])
        else:
            self.histogram.show_histograms(name, self.a.histograms.get(name), None,
                                           self.a.stats[name])
