"""A/B of a hook in the app: two copies trained in lockstep, one hooked, on the app's training
thread; both losses and the divergence plotted live in a window of their own."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QInputDialog, QLabel, QPushButton, QVBoxLayout, QWidget

from gradexplorer.core.errors import UserError, first_line
from gradexplorer.core.model.spec import load_workload
from gradexplorer.core.session.ab import ABRun, ABStep
from gradexplorer.core.session.engine import RunControl
from gradexplorer.core.session.rng import restore_rng, rng_snapshot
from gradexplorer.gui.curves import fit_range
from gradexplorer.gui.theme import PLOT_PENS, steady_axes

HOOKED_PEN = "#fb8c00"
DEFAULT_STEPS = 50


def ab_run_factory(live, module: str, action: str) -> Callable[[], ABRun]:
    """Builds the two arms of the app's current model (same spec, options and settings)."""
    config = replace(live.config, grad_norm=True)
    return lambda: ABRun(lambda: load_workload(live.spec, live.options), config, module, action,
                         seed=config.seed)


def ask_ab(parent: QWidget, module: str | None) -> tuple[str, str, int] | None:
    """Ask for ``MODULE=ACTION`` (and the steps); None when cancelled."""
    guess = f"{module or '<root>'}=scale:0.5" if module is not None else "fc1=scale:0.5"
    text, ok = QInputDialog.getText(parent, "A/B of a hook", "Train two copies in lockstep, one "
                                    "with this hook (MODULE=ACTION):", text=guess)
    if not ok or not text.strip():
        return None
    module_path, _, action = text.partition("=")
    if not action.strip():
        raise UserError(f"{text!r}: use MODULE=ACTION, e.g. fc1=scale:0.5")
    steps, ok = QInputDialog.getInt(parent, "A/B of a hook", "Steps:", DEFAULT_STEPS, 1, 100_000)
    return (module_path.strip(), action.strip(), steps) if ok else None


def ab_job(make_run: Callable[[], ABRun], steps: int, control: RunControl, window: ABWindow,
           device=None) -> Callable[[], None]:
    """A job for the app's training thread: build both arms and step them, reporting each step.

    It runs where the app's own model trains, between its steps (a run pauses meanwhile), and
    puts the random state back afterwards, so the app's session goes on as if it had not run.
    """
    def job() -> None:
        state = rng_snapshot(device)
        try:
            ab = make_run()
            window.ready.emit(f"{ab.plain.workload.name}: {ab.module or '<root>'}={ab.action} "
                              "on the hooked arm; same batches and random numbers")
            for result in ab.run(steps, control):
                window.stepped.emit(result)
        except Exception as exc:  # noqa: BLE001 - shown as one line
            window.failed.emit(first_line(exc))
        finally:
            restore_rng(state)
            window.done.emit()
    return job


class ABWindow(QWidget):
    """Loss of both arms, and their divergence (parameter distance, gradient cosine).

    ``post`` runs a job on the app's training thread (``SessionController.post``).
    """

    stepped = Signal(object)  # ABStep, from the training thread
    failed = Signal(str)
    ready = Signal(str)  # a one-line description of the two arms
    done = Signal()

    def __init__(self, make_run: Callable[[], ABRun], steps: int, post: Callable,
                 device=None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("gradexplorer — A/B of a hook")
        self.resize(900, 620)
        self.steps: list[int] = []
        self.plain: list[float] = []
        self.hooked: list[float] = []
        self.divergence: list[float] = []
        self.cosine: list[float] = []
        self.identical: list[bool] = []
        self.header = QLabel("building both arms…")
        self.latest = QLabel("")
        self.plots = pg.GraphicsLayoutWidget()
        self.loss_plot = self._plot(0, "loss of both arms (one scale)")
        self.div_plot = self._plot(1, "divergence ‖θ_A − θ_B‖")
        self.cos_plot = self._plot(2, "gradient cosine of A and B")
        for plot in (self.div_plot, self.cos_plot):
            plot.setXLink(self.loss_plot)  # one step axis for the three
        self.legend = self.loss_plot.addLegend(offset=(-8, 8), labelTextSize="9pt")
        self.plain_item = self.loss_plot.plot(pen=pg.mkPen(PLOT_PENS["loss"], width=1.5),
                                              name="A: plain")
        self.hooked_item = self.loss_plot.plot(pen=pg.mkPen(HOOKED_PEN, width=1.5, style=Qt.DashLine),
                                               name="B: hooked")
        self.div_item = self.div_plot.plot(pen=pg.mkPen(PLOT_PENS["norm"], width=1.5))
        self.cos_item = self.cos_plot.plot(pen=pg.mkPen("#43a047", width=1.5))
        self.stop_button = QPushButton("Stop")
        layout = QVBoxLayout(self)
        for widget in (self.header, self.latest, self.plots, self.stop_button):
            layout.addWidget(widget)
        self.control = RunControl()
        self.finished = False
        self.ready.connect(self.header.setText)
        self.stepped.connect(self.add_step)
        self.failed.connect(lambda text: self.header.setText(f"A/B failed: {text}"))
        self.done.connect(self._done)
        self.stop_button.clicked.connect(self.control.stop)
        post(ab_job(make_run, steps, self.control, self, device))

    def _done(self) -> None:
        self.finished = True
        self.stop_button.setEnabled(False)

    def _plot(self, row: int, title: str) -> pg.PlotItem:
        plot = self.plots.addPlot(row=row, col=0, title=title)
        plot.showGrid(x=True, y=True, alpha=0.2)
        steady_axes(plot, steps=True)
        return plot

    def add_step(self, result: ABStep) -> None:
        """Append one lockstep step and redraw."""
        self.steps.append(result.step)
        self.plain.append(result.plain.loss)
        self.hooked.append(result.hooked.loss)
        self.divergence.append(result.divergence)
        self.cosine.append(result.grad_cosine)
        self.identical.append(result.identical)
        x = np.asarray(self.steps, dtype=float)
        for item, values in ((self.plain_item, self.plain), (self.hooked_item, self.hooked),
                             (self.div_item, self.divergence), (self.cos_item, self.cosine)):
            item.setData(x, np.asarray(values, dtype=float), connect="finite")
        fit_range(self.loss_plot, np.concatenate([x, x]), np.asarray(self.plain + self.hooked, dtype=float))
        fit_range(self.div_plot, x, np.asarray(self.divergence))
        fit_range(self.cos_plot, x, np.asarray(self.cosine))
        same = "  bit-identical" if result.identical else ""
        self.latest.setText(f"step {result.step}  loss {result.plain.loss:.6g} | hooked "
                            f"{result.hooked.loss:.6g}  divergence {result.divergence:.4g}  "
                            f"grad-cos {result.grad_cosine:.6g}{same}")

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt API
        """Stop the arms after their current step."""
        self.control.stop()
        super().closeEvent(event)
