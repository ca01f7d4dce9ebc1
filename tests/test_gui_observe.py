"""Observe hooks visible: what an ``observe`` hook saw reaches the details pane and the plots."""

from __future__ import annotations

import numpy as np
import torch

from gradexplorer.core.hooks.observed import ObservedGrads
from gradexplorer.gui.plots.histogram_plot import shown_counts, spiky
from tests.gui_helpers import TIMEOUT_MS, open_model, wait_idle


def test_observed_module_shows_grad_statistics_and_histograms(qtbot, make_window):
    window = make_window()
    open_model(qtbot, window)
    controller = window.controller
    with qtbot.waitSignal(controller.session.hooks_changed, timeout=TIMEOUT_MS):
        controller.attach_hook("fc1", "observe")
    wait_idle(qtbot, window)
    window.selection.select(module="fc1", source="test")
    assert "observed" not in window.details.toPlainText()  # nothing seen before a step
    assert not window.gradients.observed_plot.isVisible()
    controller.run(2)
    wait_idle(qtbot, window)
    seen = controller.session.observed["fc1"]
    assert isinstance(seen, ObservedGrads) and seen.step == 2 and seen.calls == 2
    # plain numbers only crossed the thread boundary, never a tensor
    assert not any(isinstance(v, torch.Tensor) for e in seen.grad_output if e for v in e.values())
    out = seen.grad_output[0]
    text = window.details.toPlainText()
    assert "observed at step 2" in text and f"norm {out['norm']:.4g}" in text
    assert "grad_input[0]" in text and "grad_output[0]" in text
    hist = seen.histograms["grad_output.0"]
    assert hist.total == int(np.prod(out["shape"]))
    plot = window.gradients.observed_plot
    assert plot.isVisible()
    assert plot.height() >= window.gradients.histogram.height() // 2  # room to read, not squeezed
    xs, ys = plot.current_item.getData()
    drawn = shown_counts(hist.counts, spiky(hist.counts))  # log counts for a spike at 0
    assert np.array_equal(ys, drawn) and np.array_equal(xs, hist.edges)
    window.selection.select(module="fc2", source="test")  # not observed: plot hidden, no rows
    assert not plot.isVisible() and "observed" not in window.details.toPlainText()
    with qtbot.waitSignal(controller.session.hooks_changed, timeout=TIMEOUT_MS):
        controller.detach_hook("fc1")
    wait_idle(qtbot, window)
    assert controller.session.observed == {}
