"""The main window end to end: graph clicks, hooks through the UI, runs, errors, shutdown."""

from __future__ import annotations

from gradexplorer.gui.graph.tint import NO_GRADIENT
from tests.gui_helpers import TIMEOUT_MS, click_node, node_index, open_model, wait_idle


def test_clicking_a_graph_node_selects_it_everywhere(qtbot, make_window):
    window = make_window()
    open_model(qtbot, window)
    drawing = window.graph_panel.drawing
    fc1 = node_index(drawing, "AddmmBackward0", "fc1")
    click_node(qtbot, window, fc1)
    selection = window.selection.current
    assert selection.node == drawing.ids[fc1] and selection.module == "fc1"
    assert [item.data(0, 256) for item in window.tree.selectedItems()] == ["fc1"]
    assert window.graph_panel.selected_nodes().tolist() == [fc1]
    html = window.details.toPlainText()
    assert "AddmmBackward0" in html and "fc1" in html and "fc1.weight" in html
    assert window.gradients.param == "fc1.weight"  # the plots follow the selection
    click_node(qtbot, window, node_index(drawing, "ConvolutionBackward0", "conv1"))
    assert window.selection.current.module == "conv1"


def test_search_finds_nodes_by_module_and_parameter(qtbot, make_window):
    window = make_window()
    open_model(qtbot, window)
    panel = window.graph_panel
    panel.search_edit.setText("fc2.bias")
    assert [panel.drawing.params[i] for i in panel.view.canvas.matches] == ["fc2.bias"]
    panel.search_edit.setText("conv")
    modules = {panel.drawing.modules[i] or panel.drawing.params[i] for i in panel.view.canvas.matches}
    assert modules and all("conv" in m for m in modules)
    panel.next_match()
    assert window.selection.current.node == panel._matches[0]


def test_hook_from_the_menu_reaches_the_registry_and_blocks(qtbot, make_window):
    from gradexplorer.gui.hooks.hook_menu import HookMenu

    window = make_window()
    open_model(qtbot, window)
    menu = HookMenu("fc1", None, None, window)
    menu.attach_requested.connect(window.controller.attach_hook)
    block = next(a for a in menu.actions() if a.text() == "Block")
    with qtbot.waitSignal(window.controller.session.hooks_changed, timeout=TIMEOUT_MS):
        block.trigger()
    attached = window.controller.session.live.hooks.attached()
    assert list(attached) == ["fc1"] and attached["fc1"].action == "block"
    assert window.tree._items["fc1"].text(3) == "block"
    wait_idle(qtbot, window)  # the graph is traced again with the hook in it
    panel = window.graph_panel
    assert {panel.drawing.modules[i] for i in panel.view.canvas.marked} == {"fc1"}
    window.controller.run(3)
    wait_idle(qtbot, window)
    stats = window.controller.timeline.latest_gradients.params
    assert not stats["conv1.weight"].has_grad and stats["fc1.weight"].has_grad
    conv = node_index(panel.drawing, "ConvolutionBackward0", "conv1")
    assert panel.view.canvas.fills[conv] == NO_GRADIENT
    window.selection.select(param="conv1.weight", module="conv1")
    window.gradients.refresh()
    assert "no gradient" in window.gradients.histogram.note.toPlainText()
    with qtbot.waitSignal(window.controller.session.hooks_changed, timeout=TIMEOUT_MS):
        window.controller.detach_hook("fc1")
    assert window.controller.session.live.hooks.attached() == {}


def test_runs_in_the_worker_feed_every_plot(qtbot, make_window):
    window = make_window()
    open_model(qtbot, window)
    with qtbot.waitSignal(window.controller.timeline.changed, timeout=TIMEOUT_MS):
        window.controller.run(4)
    wait_idle(qtbot, window)
    timeline = window.controller.timeline
    assert timeline.loss.x.tolist() == [1.0, 2.0, 3.0, 4.0]
    x, y = window.curves.loss_item.getData()
    assert x.tolist() == [1.0, 2.0, 3.0, 4.0] and list(y) == list(timeline.loss.y)
    assert window.gradients.histogram.current_item.getData()[1].sum() > 0
    assert window.gradients.heatmap.has_data
    assert len(window.gradients.flow.peak_bars.opts["y"]) == 8
    table = window.table.table
    assert table.data(table.index(table.row_of("fc2.bias"), 1)) not in ("", None)
    assert window.statusBar().step_label.text() == "step 4"
    shown = (window.curves.loss_plot, window.curves.norm_plot,
             window.gradients.heatmap.plotItem, window.gradients.histogram.plotItem)
    assert [p.getAxis("left").style["showValues"] for p in shown] == [True] * 4
    window.gradients.flow.param_clicked.emit("fc2.bias")  # a click on the flow chart's row
    assert window.selection.current.param == "fc2.bias" and window.gradients.param == "fc2.bias"
    selected = window.table.selectionModel().selectedRows()
    assert [window.table.proxy.data(i) for i in selected] == ["fc2.bias"]


def test_shortcuts_step_and_close_stops_the_worker(qtbot, make_window):
    window = make_window()
    open_model(qtbot, window)
    window.run_controls.step_action.trigger()
    wait_idle(qtbot, window)
    assert window.controller.session.live.session.step_count == 1
    assert window.run_controls.step_action.shortcut().toString() == "F6"
    window.controller.run(None)  # run until stopped
    qtbot.waitUntil(lambda: window.controller.session.live.session.step_count > 2, timeout=TIMEOUT_MS)
    window.close()
    assert not window.controller._worker.isRunning()


def test_pause_and_resume(qtbot, make_window):
    window = make_window()
    open_model(qtbot, window)
    controller = window.controller
    controller.run(None)
    qtbot.waitUntil(lambda: controller.session.live.session.step_count >= 1, timeout=TIMEOUT_MS)
    controller.toggle_pause()
    assert controller.session.state == "paused" and window.run_controls.run_action.text() == "Resume"
    # Jobs run between steps, paused or not: each round trip is a turn of the training loop,
    # which steps unless the pause holds (the first may follow a step already under way).
    counts = []
    for turn in range(1, 6):
        controller.post(lambda: counts.append(controller.session.live.session.step_count))
        qtbot.waitUntil(lambda turn=turn: len(counts) == turn, timeout=TIMEOUT_MS)
    paused_at = counts[0]
    assert counts == [paused_at] * 5 and controller.session.live.session.step_count == paused_at
    controller.toggle_pause()
    qtbot.waitUntil(lambda: controller.session.live.session.step_count > paused_at, timeout=TIMEOUT_MS)
    controller.stop()
    qtbot.waitUntil(lambda: controller.session.state == "idle", timeout=TIMEOUT_MS)


def test_a_bad_model_file_shows_an_error_and_the_app_keeps_going(qtbot, make_window, tmp_path,
                                                                   monkeypatch):
    from gradexplorer.gui import errors

    shown = []
    monkeypatch.setattr(errors.QMessageBox, "critical",
                        lambda parent, title, text: shown.append(text))
    window = make_window()
    open_model(qtbot, window)
    bad = tmp_path / "broken.py"
    bad.write_text("def build(:\n    pass\n")
    window.controller.open_model(f"{bad}:build")
    qtbot.waitUntil(lambda: bool(shown), timeout=TIMEOUT_MS)
    assert shown == [f"syntax error in {bad}:1: invalid syntax"] or "syntax error" in shown[0]
    assert window.controller.session.state == "idle"
    assert window.controller.session.live.spec == "example:digits"  # the old model stays
    window.controller.run(1)
    wait_idle(qtbot, window)
    assert window.controller.session.live.session.step_count == 1


def test_open_model_dialog_builds_specs(qtbot, tmp_path):
    from gradexplorer.core.messages.errors import UserError
    from gradexplorer.gui.dialogs.open_model_dialog import OpenModelDialog

    dialog = OpenModelDialog(None, "example:lenet")
    qtbot.addWidget(dialog)
    assert dialog.spec() == "example:lenet"
    dialog.example_options.setText("batch=4")
    assert dialog.spec() == "example:lenet:batch=4"
    model = tmp_path / "net.py"
    model.write_text("def helper(): pass\ndef build(): pass\n")
    dialog.tabs.setCurrentIndex(1)
    dialog.file_edit.setText(str(model))
    assert dialog.callable_box.currentText() == "build"
    dialog.shape_edit.setText("2,3")
    assert dialog.spec() == f"{model}:build" and dialog.options().input_shape == (2, 3)
    dialog.shape_edit.setText("2,x")
    try:
        dialog.options()
    except UserError as exc:
        assert "bad shape" in str(exc)
    else:
        raise AssertionError("a bad shape must be refused")


def test_switching_optimizer_keeps_model_hooks_and_step_count(qtbot, make_window):
    window = make_window()
    open_model(qtbot, window)
    controller = window.controller
    with qtbot.waitSignal(controller.session.hooks_changed, timeout=TIMEOUT_MS):
        controller.attach_hook("fc2", "scale:0.5")
    controller.run(2)
    wait_idle(qtbot, window)
    model = controller.session.live.session.model
    controller.reconfigure(optimizer="adam", lr=1e-3)
    wait_idle(qtbot, window)
    session = controller.session.live.session
    assert session.model is model and session.step_count == 2
    assert type(session.optimizer).__name__ == "Adam"
    assert window.run_controls.optimizer_box.currentText() == "adam"
    assert list(controller.session.live.hooks.attached()) == ["fc2"]
    controller.run(1)
    wait_idle(qtbot, window)
    assert controller.timeline.loss.x.tolist() == [1.0, 2.0, 3.0]
    assert window.settings.last_model() == "example:digits"
