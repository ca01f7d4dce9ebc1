"""The app's diagnosis: gradients traced on every op and tinted, the NaN origin centred and
explained in the details pane, and the A/B window's two loss curves and divergence."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gradexplorer.gui.graph.trace_tint import NONFINITE, is_traced
from tests.gui_helpers import TIMEOUT_MS, open_model, wait_idle

NAN_MODEL = f"{Path(__file__).parent / 'data' / 'nan_sqrt_model.py'}:build"


def test_trace_gradients_tints_every_op_and_centres_the_nan_origin(qtbot, make_window):
    window = make_window()
    open_model(qtbot, window, NAN_MODEL, batch_size=None)
    panel = window.graph_panel
    untraced = panel.view.canvas.fills.copy()
    canvas = panel.view.canvas
    panel.trace_grads_action.setChecked(True)  # re-traces with a hook on every node
    # the event: the canvas paints a traced drawing (its fills are set with it, in one go)
    qtbot.waitUntil(lambda: canvas.drawing is not None and is_traced(canvas.drawing), timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    drawing = panel.drawing
    assert canvas.drawing is drawing
    fills = canvas.fills
    assert not np.array_equal(fills, untraced)  # ops are tinted now, not only parameters
    names = [label[0] for label in drawing.labels]
    sqrt = names.index("SqrtBackward0")
    assert drawing.labels[sqrt] == ("SqrtBackward0", "act · ‖g‖ inf")  # labelled by its gradient
    assert window.selection.current.node == drawing.ids[sqrt]  # selected (and centred)
    assert panel.selected_nodes().tolist() == [sqrt]
    assert fills[sqrt] == NONFINITE
    assert fills[names.index("MseLossBackward0")] != NONFINITE  # finite above the origin
    text = window.details.toPlainText()
    assert "born here" in text and "grad_x = grad_y / (2√x)" in text and "NON-FINITE" in text


def test_a_nan_step_in_the_app_names_its_origin_in_the_event_log(qtbot, make_window):
    window = make_window()
    open_model(qtbot, window, NAN_MODEL, batch_size=None)
    window.controller.step()
    qtbot.waitUntil(lambda: window.controller.timeline.loss.x.size == 1, timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    lines = [window.events.item(i).text() for i in range(window.events.count())]
    assert any("step 1: first non-finite gradient: SqrtBackward0 in module act" in line
               for line in lines), lines


def test_ab_window_plots_both_arms_and_their_divergence(qtbot, make_window):
    import torch

    window = make_window()
    open_model(qtbot, window, "example:lenet", batch_size=None)
    rng = torch.random.get_rng_state()
    same = window.hook_actions.open_ab("fc1", "scale:1.0", steps=3)
    half = window.hook_actions.open_ab("fc1", "scale:0.5", steps=3)
    for ab in (same, half):
        qtbot.waitUntil(lambda ab=ab: ab.finished, timeout=TIMEOUT_MS)
    a, b = same.series, half.series  # their data, fed through the app's mailbox
    assert len(a.steps) == len(b.steps) == 3
    assert a.divergence == [0.0, 0.0, 0.0] and all(a.identical)
    assert a.plain == a.hooked
    assert 0 < b.divergence[0] < b.divergence[1] < b.divergence[2]
    x, y = half.hooked_item.getData()
    assert list(x) == [1, 2, 3] and list(y) == b.hooked
    assert "divergence" in half.latest.text() and "fc1=scale:0.5" in half.header.text()
    assert torch.equal(torch.random.get_rng_state(), rng)  # the app's own session is undisturbed
    same.close()
    half.close()
