"""The gradients a traced step kept of chosen ops (``trace_gradients(keep=)``), in a window of
their own: one tensor at a time as a histogram of its values (the app's gradient histogram) and a
heat map of the tensor itself (rows × last dimension), its op's module and source line above,
and "Save as snapshot…"."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from gradexplorer.core.graph.style import format_shape, short_source
from gradexplorer.gui.graph.keep_gradients import TensorView, tensor_view
from gradexplorer.gui.plots.heatmap_plot import bar_axis
from gradexplorer.gui.plots.histogram_plot import HistogramPlot, NamedTitle
from gradexplorer.gui.plots.hover import HoverReadout, corner_readout
from gradexplorer.gui.text.number_text import format_number
from gradexplorer.gui.theme import steady_axes
from gradexplorer.gui.window.window_fit import screen_size

DIVERGING = [(33, 102, 172), (146, 197, 222), (247, 247, 247), (244, 165, 130), (178, 24, 43)]


class TensorHeatmap(NamedTitle, pg.PlotWidget):
    """One tensor's values as an image: blue negative, white zero, red positive (symmetric
    about zero); the value under the mouse in the corner."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.set_named_title("heat map of the tensor", None)
        self.plotItem.setLabel("bottom", "last dimension")
        self.plotItem.setLabel("left", "row")
        steady_axes(self.plotItem)
        self.plotItem.invertY(True)  # row 0 on top, as the tensor prints
        self.image = pg.ImageItem(axisOrder="row-major")
        self.addItem(self.image)
        cmap = pg.ColorMap(np.linspace(0, 1, len(DIVERGING)), DIVERGING)
        self.colour_bar = pg.ColorBarItem(colorMap=cmap, interactive=False, values=(-1, 1), width=12)
        self.colour_bar.setImageItem(self.image, insert_in=self.plotItem)
        bar_axis(self.colour_bar, "gradient value")
        self.readout, self.show_readout = corner_readout(self)
        self.matrix: np.ndarray | None = None
        self.strides = (1, 1)
        self.hover = HoverReadout(self.scene(), [self.plotItem],
                                  lambda _plot, x, y: self.describe_cell(x, y), self.show_readout)

    def show_tensor(self, view: TensorView) -> None:
        """Draw a tensor's ``TensorView`` (made off the GUI thread: ``tensor_view``)."""
        matrix, (rows, cols) = view.matrix, view.strides
        self.matrix, self.strides = matrix, (rows, cols)
        finite = np.isfinite(matrix)
        top = float(np.abs(matrix[finite]).max()) if finite.any() else 0.0
        top = top or 1.0
        self.image.setImage(np.where(finite, matrix, 0.0), levels=(-top, top))
        self.image.setRect(0, 0, matrix.shape[1] * cols, matrix.shape[0] * rows)
        self.colour_bar.setLevels((-top, top))
        shape = format_shape(view.shape) or "scalar"
        self.set_named_title(f"heat map · {shape}", None)  # (the window's chooser names it)
        self.plotItem.setLabel("left", "row" if rows == 1 else f"row (every {rows}th)")
        self.plotItem.setLabel("bottom", "last dimension" if cols == 1 else
                               f"last dimension (every {cols}th)")
        self.plotItem.vb.setRange(xRange=(0, matrix.shape[1] * cols), yRange=(0, matrix.shape[0] * rows),
                                  padding=0.02)

    def describe_cell(self, x: float, y: float) -> str:
        """``[row 3, col 17] = -0.00412``."""
        if self.matrix is None:
            return ""
        r, c = int(y // self.strides[0]), int(x // self.strides[1])
        if not (0 <= r < self.matrix.shape[0] and 0 <= c < self.matrix.shape[1]):
            return ""
        return f"[row {r * self.strides[0]}, col {c * self.strides[1]}] = " \
            f"{format_number(float(self.matrix[r, c]), 6)}"


class KeptGradientsWindow(QWidget):
    """The kept tensors of one traced step (``KeptGradients``), one shown at a time."""

    def __init__(self, kept, save=None, views: dict[str, TensorView] | None = None,
                 parent: QWidget | None = None) -> None:
        """``save(directory)``: writes the snapshot (the app posts it to its training thread);
        ``views``: each tensor's histogram and heat-map matrix, made on the training thread
        (made here, on first show, where not given)."""
        from gradexplorer.core.diagnose.kept_grads import byte_text, counted

        super().__init__(parent)
        self.kept, self.save, self.views = kept, save, dict(views or {})
        self.setWindowTitle(f"gradexplorer — kept gradients of step {kept.step}")
        self.resize(screen_size(self, QSize(1000, 560)))
        ops = "; ".join(op_text(op) for op in kept.ops[:3]) + \
            (f"; and {len(kept.ops) - 3} more ops" if len(kept.ops) > 3 else "")
        self.header = QLabel(f"step {kept.step}: {counted(len(kept), 'tensor')} of "
                             f"{counted(len(kept.ops), 'op')}, {byte_text(kept.bytes)} — {ops}")
        self.header.setWordWrap(True)
        self.header.setTextFormat(Qt.PlainText)
        self.header.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.chooser = QComboBox()
        for key, tensor in kept.items():
            self.chooser.addItem(f"{key}  {format_shape(tuple(tensor.shape)) or 'scalar'}", key)
        self.histogram = HistogramPlot(title="values")
        self.heatmap = TensorHeatmap()
        plots = QSplitter(Qt.Horizontal)
        plots.addWidget(self.histogram)
        plots.addWidget(self.heatmap)
        self.save_button = QPushButton("Save as snapshot…")
        self.save_button.setToolTip("a snapshot folder kept-step-NNNNNN: these tensors under "
                                    "hooks/<key> (safetensors), each op's module and line in its manifest")
        self.save_button.setEnabled(save is not None)
        self.save_button.clicked.connect(self._save)
        row = QHBoxLayout()
        row.addWidget(self.chooser, 1)
        row.addWidget(self.save_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.header)
        layout.addLayout(row)
        layout.addWidget(plots, 1)
        self.chooser.currentIndexChanged.connect(lambda _i: self.show_key(self.chooser.currentData()))
        if len(kept):
            self.show_key(self.chooser.currentData())

    def show_key(self, key: str) -> None:
        """Draw the kept tensor ``key``."""
        view = self.views.get(key)
        if view is None:
            view = self.views[key] = tensor_view(self.kept[key])
        slot = key.split(".", 2)[-1]  # grad_input.2 (the chooser names the op; a long title
        self.histogram.show_histograms(slot, view.histogram, None, None)  # clips the plot)
        self.heatmap.show_tensor(view)

    def _save(self) -> None:
        directory = QFileDialog.getExistingDirectory(self, "Save the kept gradients in")
        if directory:
            self.save(directory)


def op_text(op: dict) -> str:
    """``AddmmBackward0 (node 9) in fc1 at lenet.py:28``."""
    where = f" at {short_source(op['source'])}" if op.get("source") else ""
    return f"{op['op']} (node {op['node']}) in {op['module'] or '(model)'}{where}"
