"""While the app's first model loads (its graph already drawn, its training still being set
up), what a person does is kept: a click on the graph stays selected once the model opens, the
lr box names no learning rate before there is one, and the window closes at once."""

from __future__ import annotations

from gradexplorer.core.model.spec import ModelOptions
from gradexplorer.core.session.engine import SessionConfig
from tests.gui_helpers import TIMEOUT_MS, click_node, wait_idle


def test_a_click_on_the_first_graph_survives_the_model_opening(qtbot, make_window, monkeypatch):
    window = make_window()
    session = window.controller.session
    opened, held = session.open, []
    monkeypatch.setattr(session, "open", lambda live, fresh: held.append((live, fresh)))
    window.open_model("example:digits", ModelOptions(batch_size=16), SessionConfig(device="cpu"))
    qtbot.waitUntil(lambda: window.graph_panel.drawing is not None and not window.graph_panel.busy(),
                    timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: bool(held), timeout=TIMEOUT_MS)  # its training set up, not yet shown
    assert window.controller.session.live is None
    drawing = window.graph_panel.drawing
    fc1 = next(i for i, m in enumerate(drawing.modules) if m == "fc1" and drawing.params[i] is None)
    click_node(qtbot, window, fc1)
    assert window.selection.current.module == "fc1"
    opened(*held[0])  # the model opens now
    wait_idle(qtbot, window)
    assert window.selection.current.module == "fc1"  # the click is kept...
    assert window.tree.currentItem() is not None and window.tree.currentItem().text(0) == "fc1"
    assert ">fc1<" in window.details.toHtml()  # ...and described


def test_the_lr_box_names_no_rate_before_a_model(qtbot, make_window):
    window = make_window()
    spin = window.run_controls.lr_spin
    assert spin.text() == "—"  # not 0.000001, its minimum, as if it were set
    window.open_model("example:digits", ModelOptions(batch_size=16), SessionConfig(device="cpu"))
    qtbot.waitUntil(lambda: window.controller.session.live is not None, timeout=TIMEOUT_MS)
    lr = window.controller.session.live.session.optimizer.param_groups[0]["lr"]
    assert spin.value() == lr and spin.text() == spin.textFromValue(lr) != "—"
    spin.setValue(spin.minimum())  # the smallest rate, once set, reads as a figure
    assert spin.text() == "0.000001"
    wait_idle(qtbot, window)


def test_closing_while_the_model_opens_skips_its_training_set_up(qtbot, make_window, monkeypatch):
    """Closing during start-up waited for the whole training set-up (the first optimizer,
    torch._dynamo, the statistics kernels: ~10 s on 2 cores) that nobody would use; now only
    the job already running is finished."""
    import gradexplorer.gui.session.controller as controller_module
    import gradexplorer.gui.training.live_session as live_session

    set_up = []
    real = live_session.open_live_session
    monkeypatch.setattr(live_session, "open_live_session",
                        lambda *a, **k: set_up.append(a[0]) or real(*a, **k))
    monkeypatch.setattr(controller_module, "FIRST_VIEW_WAIT_S", 600.0)  # the set-up waits for the view
    window = make_window()
    monkeypatch.setattr(window.controller, "first_view_shown", lambda: None)  # ...which never says so
    window.open_model("example:digits", ModelOptions(batch_size=16), SessionConfig(device="cpu"))
    qtbot.waitUntil(lambda: window.graph_panel.drawing is not None, timeout=TIMEOUT_MS)
    window.close()
    assert not window.controller._worker.isRunning()
    assert set_up == [] and window.controller.session.live is None  # no training set up for nobody


def test_closing_during_start_up_imports_nothing_and_lays_out_nothing(qtbot, make_window, monkeypatch):
    """Closing imported run_view, whose import of torch waited on the training thread's import
    lock (seconds, the window frozen on screen), and laid out a first graph traced just before."""
    import sys

    import networkx as nx

    from gradexplorer.gui.models.session import GraphTraced

    window = make_window()
    monkeypatch.delitem(sys.modules, "gradexplorer.gui.runs.run_view", raising=False)  # no run shown yet
    window.close()
    assert "gradexplorer.gui.runs.run_view" not in sys.modules
    requests = window.graph_panel.layouts.latest
    graph = nx.DiGraph()
    graph.add_node(0, name="SumBackward0", kind="op")
    window._job_finished(GraphTraced(graph, True, True))  # the first view, traced just before
    assert window.graph_panel.layouts.latest == requests and window.graph_panel.drawing is None


def test_a_layout_done_after_its_queue_was_deleted_is_dropped_quietly(capfd):
    from gradexplorer.gui.graph.layout_worker import _Task

    def deleted(_result):
        raise RuntimeError("Signal source has been deleted")

    _Task(lambda: 1, deleted, deleted).run()  # at exit: no traceback, nothing raised
    assert "Traceback" not in capfd.readouterr().err
