"""GUI parts built straight from core objects (no main window)."""

from __future__ import annotations

import numpy as np
import pytest

from gradexplorer.core.hooks import HookRegistry
from gradexplorer.core.model.callable_finder import list_callables
from gradexplorer.core.model.spec import ModelOptions, load_workload
from gradexplorer.core.session.engine import SessionConfig, TrainingSession
from gradexplorer.core.stats.monitor import GradientMonitor
from gradexplorer.gui.models.timeline import TimelineModel
from gradexplorer.gui.training.run_buffer import RunBuffer


@pytest.fixture
def digits_session():
    session = TrainingSession(load_workload("example:digits", ModelOptions(batch_size=16)),
                              SessionConfig(device="cpu"))
    monitor = GradientMonitor(bins=32)
    session.add_observer(monitor)
    return session


def test_run_buffer_hands_over_every_step_once_and_wakes_once(digits_session):
    wakes = []
    buffer = RunBuffer(lambda: wakes.append(1))
    results = [digits_session.step() for _ in range(3)]
    for result in results:
        buffer.push(result)
    assert len(wakes) == 1  # one wake-up of the GUI thread, however many steps arrive
    update = buffer.drain()
    assert [p.step for p in update.points] == [1, 2, 3]
    assert [p.loss for p in update.points] == [r.loss for r in results]
    assert buffer.drain() is None  # nothing new
    buffer.push_event("attached", "fc1", "attached observe to fc1")
    assert len(wakes) == 2 and buffer.drain().events[0][1] == "fc1"


def test_a_steps_figures_reach_the_timeline_through_the_mailbox_only(digits_session):
    """The timeline keeps its own history, fed by the records the mailbox carries: never the
    monitor's history, which the training thread appends to."""
    from gradexplorer.core.stats.history import GradientHistory

    monitor = next(o for o in digits_session.observers if isinstance(o, GradientMonitor))
    buffer, timeline = RunBuffer(), TimelineModel()
    changes = []
    timeline.changed.connect(lambda: changes.append(len(timeline.loss.x)))
    timeline.reset(GradientHistory(monitor.history.maxlen))
    results = []
    for _ in range(3):
        results.append(digits_session.step())
        buffer.push(results[-1])
    assert len(timeline.gradients) == 0  # nothing until the GUI thread drains the mailbox
    update = buffer.drain()
    timeline.extend(update.points, update.steps_per_second)
    assert changes == [0, 3]
    assert timeline.loss.x.tolist() == [1.0, 2.0, 3.0]
    assert timeline.gradients is not monitor.history
    assert [g.step for g in timeline.gradients] == [1, 2, 3]
    assert list(timeline.gradients) == [r.gradients for r in results]
    assert timeline.latest_gradients is monitor.latest()
    digits_session.step()  # a step the GUI has not drained yet: not seen
    assert len(timeline.gradients) == 3 and len(monitor.history) == 4
    current, previous = timeline.histograms_of("fc1.weight")
    assert current.counts.sum() == 64 * 512 and previous is not None
    assert not np.array_equal(current.counts, previous.counts)


def test_module_tree_lists_modules_and_selects(qtbot, digits_session):
    from gradexplorer.gui.models.selection import SelectionModel
    from gradexplorer.gui.panels.module_tree import ModuleTree

    selection = SelectionModel()
    tree = ModuleTree(selection)
    qtbot.addWidget(tree)
    tree.set_model(digits_session.model)
    assert set(tree._items) == {"", "conv1", "conv2", "fc1", "fc2"}
    assert tree._items["fc1"].text(2) == "32,832"
    tree.setCurrentItem(tree._items["fc1"])
    assert selection.current.module == "fc1"
    tree.set_hooks({"fc1": "block"})
    assert tree._items["fc1"].text(3) == "block" and tree._items["fc2"].text(3) == ""
    selection.select(param="conv2.bias", module="conv2", source="table")
    assert [i.data(0, 256) for i in tree.selectedItems()] == ["conv2"]


def test_parameter_table_shows_live_stats(qtbot, digits_session):
    from gradexplorer.gui.models.selection import SelectionModel
    from gradexplorer.gui.panels.parameter_table import ParameterTable

    selection = SelectionModel()
    table = ParameterTable(selection)
    qtbot.addWidget(table)
    table.table.set_model(digits_session.model)
    result = digits_session.step()
    stats = result.gradients.params
    table.table.set_stats(stats)
    model = table.table
    row = model.row_of("fc1.weight")
    assert model.data(model.index(row, 5)) == "64×512"
    assert model.data(model.index(row, 1)) == f"{stats['fc1.weight'].norm:.3g}"
    assert model.data(model.index(row, 4)) == "ok"
    assert model.data(model.index(row, 3)) == f"{stats['fc1.weight'].update_ratio:.3g}"
    selection.select(param="fc2.bias", module="fc2", source="graph")
    selected = table.selectionModel().selectedRows()
    assert [model.rows[table.proxy.mapToSource(i).row()][0] for i in selected] == ["fc2.bias"]


def test_parameter_table_flags_missing_gradients(qtbot, digits_session):
    from gradexplorer.gui.panels.parameter_table import ParameterTableModel

    hooks = HookRegistry(digits_session.model)
    hooks.install(digits_session)
    hooks.attach("fc1", "block")
    stats = digits_session.step().gradients.params
    model = ParameterTableModel()
    model.set_model(digits_session.model)
    model.set_stats(stats)
    text = {name: model.data(model.index(i, 1)) for i, (name, *_r) in enumerate(model.rows)}
    assert text["conv1.weight"] == "no grad" and text["conv2.bias"] == "no grad"
    assert text["fc1.weight"] not in ("", "no grad")


def test_callable_finder_lists_builders_first(tmp_path):
    path = tmp_path / "model.py"
    path.write_text("import torch\nclass Net: pass\ndef helper(): pass\ndef build(): pass\n"
                    "def _private(): pass\n")
    assert list_callables(path) == ["build", "Net", "helper"]
    assert list_callables(tmp_path / "missing.py") == []
    (tmp_path / "bad.py").write_text("def (:\n")
    assert list_callables(tmp_path / "bad.py") == []


def test_histogram_plot_ghosts_previous_and_explains_missing(qtbot, digits_session):
    from gradexplorer.gui.plots.histogram_plot import HistogramPlot

    plot = HistogramPlot()
    qtbot.addWidget(plot)
    first = digits_session.step().gradients
    second = digits_session.step().gradients
    name = "conv1.weight"
    plot.show_histograms(name, second.histograms[name], first.histograms[name], second.params[name])
    x, y = plot.current_item.getData()
    assert len(x) == 33 and y.sum() == 144
    assert plot.previous_item.getData()[1].sum() == 144
    assert plot.note.toPlainText() == ""
    plot.set_log(True)
    plot.show_histograms(name, second.histograms[name], None, second.params[name])
    assert np.allclose(plot.current_item.getData()[1], np.log10(1 + second.histograms[name].counts))
    no_grad = type(second.params[name])(name, (16, 1, 3, 3), 144, has_grad=False)
    plot.show_histograms(name, None, None, no_grad)
    assert plot.current_item.getData()[0] is None or len(plot.current_item.getData()[0]) == 0
    assert "no gradient" in plot.note.toPlainText()


def test_flow_chart_and_alarm_follow_stats(qtbot, digits_session):
    from gradexplorer.gui.plots.alarm_banner import alarm_text
    from gradexplorer.gui.plots.flow_chart import GradientFlowChart, flow_values

    gradients = digits_session.step().gradients
    chart = GradientFlowChart()
    qtbot.addWidget(chart)
    chart.show_stats(gradients.params)
    names, rms, peak, bad = flow_values(gradients.params)
    assert names[0] == "conv1.weight" and np.all(peak >= rms) and not bad.any()
    assert len(chart.peak_bars.opts["y"]) == len(names)
    assert alarm_text(gradients) == ""
    gradients.params["fc2.bias"].nan_count = 3
    assert "fc2.bias (3 NaN, 0 Inf)" in alarm_text(gradients)


def test_worker_runs_posted_jobs_between_steps_with_typed_results(qtbot, digits_session):
    from gradexplorer.gui.models.session import SettingApplied
    from gradexplorer.gui.session.session_worker import SessionWorker

    finished = []

    class StepSpy:
        def after_step(self, _session, result):
            finished.append(result.step)

    digits_session.add_observer(StepSpy())
    worker = SessionWorker()
    worker.start()
    try:
        seen = []

        def job():  # records how many steps had fully finished when it ran
            seen.append((digits_session.step_count, len(finished)))
            return SettingApplied("lr", 0.5)

        with qtbot.waitSignal(worker.run_finished, timeout=60_000):
            worker.start_run(digits_session, 6)
            for _ in range(3):
                worker.post(job)
        with qtbot.waitSignal(worker.job_failed, timeout=60_000) as failed:
            worker.post(lambda: digits_session.set_lr(-1.0))
        assert failed.args == ["learning rate must be positive, got -1.0"]
    finally:
        worker.shutdown()
    assert len(seen) == 3 and all(count == done for count, done in seen)  # never inside a step
    assert worker.buffer.drain().latest.step == 6


def test_device_chooser_greys_out_absent_devices_with_the_reason(qtbot):
    from PySide6.QtCore import Qt

    from gradexplorer.core.session.devices import available_devices, unavailable_devices
    from gradexplorer.gui.window.run_controls import device_chooser

    absent = unavailable_devices()
    box = device_chooser(available_devices(), absent)
    qtbot.addWidget(box)
    assert box.itemText(0) == "cpu"
    for kind, why in absent.items():
        index = box.findText(f"{kind} (unavailable)")
        assert index > 0
        assert box.itemData(index, Qt.ToolTipRole) == why
        assert not box.model().item(index).isEnabled()
        assert why in box.toolTip()


def test_noise_dialog_asks_for_a_seed(qtbot, monkeypatch):
    from PySide6.QtWidgets import QInputDialog

    from gradexplorer.core.hooks.parse import parse_action
    from gradexplorer.gui.hooks.hook_menu import HookMenu

    monkeypatch.setattr(QInputDialog, "getDouble", staticmethod(lambda *a, **k: (0.02, True)))
    monkeypatch.setattr(QInputDialog, "getInt", staticmethod(lambda *a, **k: (7, True)))
    menu = HookMenu("fc1")
    qtbot.addWidget(menu)
    noise = next(a for a in menu.actions() if a.text() == "Noise…")
    with qtbot.waitSignal(menu.attach_requested, timeout=30_000) as attached:
        noise.trigger()
    assert attached.args == ["fc1", "noise:0.02:7"]
    parse_action(attached.args[1])  # a spec the registry accepts
    monkeypatch.setattr(QInputDialog, "getInt", staticmethod(lambda *a, **k: (0, False)))
    with qtbot.assertNotEmitted(menu.attach_requested, wait=100):
        noise.trigger()  # cancelling the seed attaches nothing


def test_subtree_parameter_counts_match_each_module_own_count():
    import torch

    from gradexplorer.gui.panels.module_tree import subtree_parameter_counts

    shared = torch.nn.Linear(3, 3)
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Sequential(shared, torch.nn.ReLU(), shared),
                                torch.nn.LayerNorm(3))
    counts = subtree_parameter_counts(model)
    for path, module in model.named_modules():
        assert counts.get(path, 0) == sum(p.numel() for p in module.parameters()), path


def test_an_ab_runs_steps_travel_in_the_mailbox_in_order_and_wake_once():
    """A/B steps pushed from the training thread: one wake-up, consecutive steps as one batch,
    applied to the window's series in order on drain (one ``changed`` per batch)."""
    import threading

    from gradexplorer.core.session.ab import ABStep
    from gradexplorer.core.session.engine import StepResult
    from gradexplorer.gui.models.ab_series import ABSeries

    def ab_step(k):
        return ABStep(k, StepResult(k, 1.0 / k, None, {}), StepResult(k, 2.0 / k, None, {}),
                      divergence=0.1 * k, grad_cosine=1.0 - 0.01 * k, identical=False)

    wakes, series, seen = [], ABSeries(), []
    buffer = RunBuffer(lambda: wakes.append(1))
    series.changed.connect(lambda: seen.append(list(series.steps)))
    ended = []
    series.ended.connect(ended.append)

    def training_thread():
        buffer.push_ab(series, "ready", "arms")
        for k in range(1, 6):
            buffer.push_ab(series, "steps", ab_step(k))
        buffer.push_ab(series, "done")

    thread = threading.Thread(target=training_thread)
    thread.start()
    thread.join()
    assert len(wakes) == 1 and series.steps == []  # nothing applied before the GUI drains
    update = buffer.drain()
    assert [kind for _, kind, _ in update.ab] == ["ready", "steps", "done"]
    for target, kind, payload in update.ab:
        target.apply(kind, payload)
    assert seen == [[1, 2, 3, 4, 5]] and series.description == "arms"
    assert series.divergence == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5])
    assert series.finished and ended == [""]
