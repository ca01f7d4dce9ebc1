"""Keep this op's gradient in the app (issue 34): the right-click menu offers it for the clicked
op and for its module's ops, the size is said before anything runs, the kept tensors open as a
histogram and a heat map of the tensor, and they save as a snapshot."""

from __future__ import annotations

import numpy as np
import torch

from gradexplorer.core.diagnose.kept_grads import graph_plan
from gradexplorer.gui.graph.keep_gradients import confirmation_text
from tests.gui_helpers import TIMEOUT_MS, node_index, open_model, wait_idle


def test_keep_an_ops_gradient_from_the_menu_shows_and_saves_it(qtbot, make_window, tmp_path):
    from gradexplorer.core.snapshot import read_snapshot

    window = make_window()
    window.resize(1024, 700)
    open_model(qtbot, window, "example:lenet", batch_size=None)
    panel = window.graph_panel
    index = node_index(panel.drawing, "AddmmBackward0", "fc1")
    node = panel.drawing.ids[index]
    window.selection.select(node=node, module="fc1", param=None, source="graph")
    window.hook_actions.show_menu("fc1", window.mapToGlobal(window.rect().center()))
    menu = window.hook_actions.menu
    labels = [a.text() for a in menu.actions()]
    assert f"Keep this op's gradient (AddmmBackward0, node {node})…" in labels
    assert "Keep the gradients of fc1's ops…" in labels
    menu.close()
    window.hook_actions.show_menu("fc2", window.mapToGlobal(window.rect().center()))  # a tree row's
    labels = [a.text() for a in window.hook_actions.menu.actions()]  # menu: fc2, node 9 still selected
    assert "Keep the gradients of fc2's ops…" in labels and not any("this op" in t for t in labels)
    window.hook_actions.menu.close()

    plan = graph_plan(panel.graph, [node])
    text = confirmation_text(panel.graph, [node], plan)
    assert text.startswith("Trace one step and keep the full gradients of 1 op:\n"
                           f"AddmmBackward0 (node {node}) in fc1 at lenet.py:")
    assert "4 tensors, about 195 KB (limit 1 GB)" in text  # (120 + 400 + 48,000 + 120) × 4 bytes

    keep = window.hook_actions.keep
    assert keep.ask([node], confirm=False)
    qtbot.waitUntil(lambda: len(keep.windows) == 1, timeout=TIMEOUT_MS)
    shown = keep.windows[0]
    kept = shown.kept
    assert kept.bytes == plan.bytes and sorted(kept) == [
        f"node{node}.AddmmBackward0.{s}" for s in ("grad_input.0", "grad_input.1", "grad_input.2",
                                                   "grad_output.0")]
    assert "AddmmBackward0 (node" in shown.header.text() and "in fc1 at lenet.py:" in shown.header.text()
    key = f"node{node}.AddmmBackward0.grad_input.2"  # the weight's transpose: 400×120
    shown.chooser.setCurrentIndex(shown.chooser.findData(key))
    assert shown.histogram.drawn == ("grad_input.2", None)
    assert int(shown.histogram.current.counts.sum()) == 48_000
    assert shown.heatmap.matrix.shape == (400, 120)
    assert np.array_equal(shown.heatmap.matrix, kept[key].double().numpy())
    assert shown.heatmap.plotItem.titleLabel.text == "heat map · 400×120"

    shown.save(str(tmp_path))
    wait_idle(qtbot, window)
    qtbot.waitUntil(lambda: (tmp_path / "kept-step-000000" / "manifest.json").exists(), timeout=TIMEOUT_MS)
    tensors = read_snapshot(tmp_path / "kept-step-000000").extra_tensors()
    assert all(torch.equal(tensors[f"hooks/{k}"], t) for k, t in kept.items())
    assert all(p.grad is None for p in window.controller.session.live.session.model.parameters())


def test_a_kept_tensors_picture_is_strided_past_512_cells_a_side_and_exact_below():
    from gradexplorer.gui.graph.keep_gradients import tensor_view

    t = torch.randn(3, 1100, 7, dtype=torch.bfloat16)
    view = tensor_view(t)
    assert view.strides == (7, 1) and view.shape == (3, 1100, 7) and view.matrix.shape == (472, 7)
    assert np.array_equal(view.matrix, t.reshape(-1, 7)[::7].double().numpy())
    assert view.histogram.total == t.numel()
    assert tensor_view(torch.tensor(2.5)).matrix.tolist() == [[2.5]]
    vector = tensor_view(torch.arange(1000.0))
    assert vector.strides == (1, 2) and vector.matrix.tolist() == [list(range(0, 1000, 2))]
