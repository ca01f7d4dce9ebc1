"""A/B of a hook in the app: two copies trained in lockstep, one hooked, on the app's training
thread; both losses and the divergence plotted live in a window of their own. The steps reach
the window's ABSeries (gui/models/ab_series.py) through the app's mailbox, as the main curves'
do, and the window redraws through its own throttle."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import QInputDialog, QLabel, QPushButton, QVBoxLayout, QWidget

from gradexplorer.core.messages.errors import UserError, first_line
from gradexplorer.core.model.spec import load_workload
from gradexplorer.core.model.training_state import restore_rng, rng_snapshot
from gradexplorer.core.session.ab import ABRun
from gradexplorer.core.session.engine import RunControl
from gradexplorer.gui.models.ab_series import ABSeries
from gradexplorer.gui.plots.curves import fit_range
from gradexplorer.gui.theme import PLOT_PENS, steady_axes
from gradexplorer.gui.throttle import throttled
from gradexplorer.gui.window.window_fit import screen_size

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


def ab_job(make_run: Callable[[], ABRun], steps: int, control: RunControl, series: ABSeries,
           push: Callable[..., None], device=None,
           between: Callable[[], bool] | None = None) -> Callable[[], None]:
    """A job for the app's training thread: build both arms and step them with the core's step
    loop, each step sent to ``series`` through the mailbox (``push(series, kind, payload)``);
    ``between`` (the worker's ``between_steps``) runs the jobs posted meanwhile between its
    steps.

    It runs where the app's own model trains, between its steps (a run pauses meanwhile), and
    puts the random state back afterwards, so the app's session goes on as if it had not run.
    """
    def job() -> None:
        state = rng_snapshot(device)
        try:
            ab = make_run()
            push(series, "ready", f"{ab.plain.workload.name}: {ab.module or '<root>'}={ab.action} "
                 "on the hooked arm; same batches and random numbers")
            for result in ab.run(steps, control, between):
                push(series, "steps", result)
        except Exception as exc:  # noqa: BLE001 - shown as one line
            push(series, "failed", first_line(exc))
        finally:
            restore_rng(state)
            push(series, "done")
    return job


REDRAW_MS = 100  # at most ten redraws a second, however fast the arms step


class ABWindow(QWidget):
    """Loss of both arms, and their divergence (parameter distance, gradient cosine).

    ``controller`` runs the job on the app's training thread (``post``) and carries its steps
    through the mailbox (``push_ab``): ``SessionController``.
    """

    def __init__(self, make_run: Callable[[], ABRun], steps: int, controller,
                 device=None, parent: QWidget | None = None, where: str = "") -> None:
        """``where``: the line of the model's code calling the hooked module (``where_used``)."""
        super().__init__(parent)
        self.setWindowTitle("gradexplorer — A/B of a hook")
        self.resize(screen_size(self, QSize(900, 620)))  # shrunk to a small screen
        self.series = ABSeries()
        self.header = QLabel("building both arms…")
        self.source = QLabel(f"hooked module called at {where}" if where else "")
        self.source.setTextFormat(Qt.PlainText)
        self.source.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.source.setVisible(bool(where))
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
        for widget in (self.header, self.source, self.latest, self.plots, self.stop_button):
            layout.addWidget(widget)
        self.control = RunControl()
        self.redraw_soon = throttled(self.redraw, timeout=REDRAW_MS, parent=self)
        self.series.changed.connect(self.redraw_soon)
        self.series.described.connect(self._described)
        self.series.ended.connect(self._ended)
        self.stop_button.clicked.connect(self.control.stop)
        controller.post(ab_job(make_run, steps, self.control, self.series, controller.push_ab,
                               device, controller.between_steps(self.control)))

    @property
    def finished(self) -> bool:
        """The run is over (finished, stopped or failed)."""
        return self.series.finished

    def _described(self, text: str) -> None:
        self.header.setText(text)

    def _ended(self, failure: str) -> None:
        self.stop_button.setEnabled(False)
        self.redraw()  # the last steps, now
        if failure:
            self.header.setText(f"A/B failed: {failure}")

    def _plot(self, row: int, title: str) -> pg.PlotItem:
        plot = self.plots.addPlot(row=row, col=0, title=title)
        plot.showGrid(x=True, y=True, alpha=0.2)
        steady_axes(plot, steps=True)
        return plot

    def redraw(self) -> None:
        """Draw every step the series holds."""
        series, result = self.series, self.series.latest
        if result is None:
            return
        x = np.asarray(series.steps, dtype=float)
        for item, values in ((self.plain_item, series.plain), (self.hooked_item, series.hooked),
                             (self.div_item, series.divergence), (self.cos_item, series.cosine)):
            item.setData(x, np.asarray(values, dtype=float), connect="finite")
        fit_range(self.loss_plot, np.concatenate([x, x]),
                  np.asarray(series.plain + series.hooked, dtype=float))
        fit_range(self.div_plot, x, np.asarray(series.divergence))
        fit_range(self.cos_plot, x, np.asarray(series.cosine))
        same = "  bit-identical" if result.identical else ""
        self.latest.setText(f"step {result.step}  loss {result.plain.loss:.6g} | hooked "
                            f"{result.hooked.loss:.6g}  divergence {result.divergence:.4g}  "
                            f"grad-cos {result.grad_cosine:.6g}{same}")

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt API
        """Stop the arms after their current step; let go of the series' events."""
        self.control.stop()
        self.series.changed.disconnect(self.redraw_soon)
        self.series.described.disconnect(self._described)
        self.series.ended.disconnect(self._ended)
        super().closeEvent(event)
