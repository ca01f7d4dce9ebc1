"""The app with micro-batches a step (issue 36): the Micro-batches and Histograms boxes are in the
run toolbar's view, not behind its » overflow, at the app's first size on a 1024×700 screen
(921×630) and at 1024×700; Trace gradients of a step of k micro-batches draws the chosen
micro-batch's graph (the graph toolbar's "micro-batch j/k" box, in view at 921 pixels), its
parameters the step's accumulated gradient: the figures of the session's own ``.grad`` once the
step is taken."""

from __future__ import annotations

import torch
from PySide6.QtWidgets import QToolButton

from tests.gui_helpers import TIMEOUT_MS, open_model, wait_idle


def in_view(toolbar, widget) -> bool:
    """Shown in the bar itself (a widget behind » is hidden until the overflow opens)."""
    return widget.isVisible() and widget.geometry().right() < toolbar.width()


def test_micro_batches_and_histograms_are_in_view_at_1024x700(qtbot, make_window):
    window = make_window()
    controls = window.run_controls
    overflow = controls.findChild(QToolButton, "qt_toolbar_ext_button")
    for size in ((921, 630), (1024, 700)):
        window.resize(*size)
        widgets = (controls.micro_spin, controls.every_spin, controls.steps_spin,
                   controls.lr_spin, controls.device_box, controls.optimizer_box)
        qtbot.waitUntil(lambda s=size, w=widgets: controls.width() == s[0] and all(
            in_view(controls, widget) for widget in w), timeout=5_000)  # laid out
        assert not overflow.isVisible(), size
    window.resize(1600, 1000)  # room for all of it: the labels and the buttons' words back
    qtbot.waitUntil(lambda: controls.width() == 1600, timeout=5_000)
    assert all(action.isVisible() for action in controls.spare_labels)
    step = controls.widgetForAction(controls.step_action)
    qtbot.waitUntil(lambda: step.width() > step.iconSize().width() + 30, timeout=5_000)  # "Step"


def test_trace_of_a_step_of_micro_batches_shows_the_chosen_one(qtbot, make_window):
    window = make_window()
    window.resize(921, 630)  # the app's first size on a 1024×700 screen
    open_model(qtbot, window, "example:digits", batch_size=16)
    session, panel = window.controller.session.live.session, window.graph_panel
    controls = panel.controls
    window.run_controls.micro_spin.setValue(3)  # applied between steps, as a job
    qtbot.waitUntil(lambda: session.config.accumulate == 3, timeout=TIMEOUT_MS)
    assert not controls.micro_action.isVisible()
    panel.view_state.trace_grads = True
    qtbot.waitUntil(lambda: panel.drawing is not None and
                    panel.drawing.graph.graph.get("micro_batches") == 3, timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    assert controls.micro_action.isVisible() and controls.micro_box.text() == "micro-batch 1/3"
    qtbot.waitUntil(controls.micro_box.isVisible, timeout=5_000)  # in the bar, not behind »
    controls.micro_box.setValue(3)  # the third micro-batch's graph
    qtbot.waitUntil(lambda: panel.drawing.graph.graph.get("micro_batch") == 2, timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    assert "micro-batch 3 of 3" in panel.busy_label.toolTip()
    traced = {a["param"]: a["grad_norm"] for _, a in panel.drawing.graph.nodes(data=True)
              if a.get("kind") == "param" and "grad_norm" in a}
    window.controller.step()
    qtbot.waitUntil(lambda: session.step_count == 1 and not window.busy(), timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    grads = {n: float(torch.linalg.vector_norm(p.grad, dtype=torch.float64))
             for n, p in session.model.named_parameters()}
    assert traced == grads  # the step's accumulated gradient, as the step made it
