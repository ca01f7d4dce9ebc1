"""A followed run and the model session never mix: opening a run turns training off and clears
the model's views, the window names the run and says when it has finished, and a run folder
that does not exist yet is waited for."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor

import gradexplorer as gx
from tests.gui_helpers import TIMEOUT_MS, open_model, wait_idle
from tests.test_gui_theme import contrast
from tests.watched_loop import make, train


def test_opening_a_run_turns_training_off_and_clears_the_model(qtbot, make_window, tmp_path):
    model, opt = make()
    rec = gx.watch(model, opt, tmp_path / "run", bins=16)
    train(model, opt, 3)
    window = make_window()
    open_model(qtbot, window)
    window.selection.select(param="fc1.weight", module="fc1", source="test")
    steps_before = window.controller.session.live.session.step_count
    assert window.file_actions.open_run(str(tmp_path / "run")) is not None
    controls = window.run_controls
    for action in (controls.step_action, controls.run_n_action, controls.run_action):
        assert not action.isEnabled()
    qtbot.waitUntil(lambda: not controls.optimizer_box.isVisible()  # the model's, not the run's
                    and not controls.lr_spin.isVisible(), timeout=TIMEOUT_MS)
    qtbot.keyClick(window, Qt.Key_F6)  # would train the hidden model
    window.settle()
    assert window.controller.session.live.session.step_count == steps_before
    assert window.controller.timeline.latest.step == 3  # the run's steps only
    assert window.selection.current.param is None
    assert "run" in window.windowTitle() and "digits" not in window.windowTitle()
    assert window.status.model_label.text() == "run run"
    assert window.hook_actions.show_menu("fc1", window.pos()) is None  # no hooks on the hidden model
    rec.close()
    qtbot.waitUntil(lambda: window.status.state_label.text() == "finished at step 3",
                    timeout=TIMEOUT_MS)
    open_model(qtbot, window, "example:lenet")  # a model again: training back on
    assert controls.step_action.isEnabled() and not window.shown_run.showing
    qtbot.waitUntil(lambda: controls.optimizer_box.isVisible() and controls.lr_spin.isVisible(),
                    timeout=TIMEOUT_MS)
    assert window.shown_run.follower is None


def test_a_run_folder_not_written_yet_is_waited_for(qtbot, make_window, tmp_path):
    window = make_window()
    assert window.file_actions.open_run(str(tmp_path / "later")) is None
    assert window.status.state_label.text().startswith("waiting")
    assert not window.run_controls.step_action.isEnabled()
    model, opt = make()
    with gx.watch(model, opt, tmp_path / "later", bins=16):
        train(model, opt, 2)
        qtbot.waitUntil(lambda: window.controller.timeline.latest is not None
                        and window.controller.timeline.latest.step == 2, timeout=TIMEOUT_MS)
    assert [r[0] for r in window.table.table.rows] == [n for n, _ in model.named_parameters()]
    assert window.status.model_label.text() == "run later"


def test_an_empty_run_folder_shows_nothing_of_the_model_before(qtbot, make_window, tmp_path):
    """It kept the last model's parameters, modules and curves under the new run's name."""
    window = make_window()
    open_model(qtbot, window)
    window.controller.run(2)
    wait_idle(qtbot, window)
    assert window.table.table.rows and len(window.controller.timeline.loss.x) == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    assert window.file_actions.open_run(str(empty)) is None  # waited for
    window.settle()
    assert window.status.model_label.text() == "run empty"
    assert window.table.table.rows == [] and window.tree.topLevelItemCount() == 0
    assert len(window.controller.timeline.loss.x) == 0 and window.controller.timeline.latest is None


def text_ink(spin) -> float:
    """The strongest contrast of a spin box's text against the box's own background."""
    image = spin.grab(spin.lineEdit().geometry()).toImage()
    background = QColor(image.pixel(image.width() // 2, 1))
    text = range(3, min(spin.fontMetrics().horizontalAdvance(spin.text()) + 3, image.width()))
    return max(contrast(QColor(image.pixel(x, y)), background)  # (not the cursor, not the arrows)
               for x in text for y in range(image.height()))


def test_the_step_count_looks_off_with_step_and_run_in_a_run_view(qtbot, make_window, tmp_path):
    """The "20 steps" box read black on white (as if enabled) beside a greyed Step and Run."""
    model, opt = make()
    with gx.watch(model, opt, tmp_path / "run", bins=16):
        train(model, opt, 2)
    window = make_window()
    window.resize(1024, 700)
    controls = window.run_controls
    spin = controls.steps_spin
    assert not spin.isEnabled() and not controls.run_n_action.isEnabled()  # no model yet
    open_model(qtbot, window)
    assert spin.isEnabled() and controls.run_n_action.isEnabled()
    enabled_ink = text_ink(spin)
    assert window.file_actions.open_run(str(tmp_path / "run")) is not None
    assert not controls.run_n_action.isEnabled() and not controls.step_action.isEnabled()
    assert not spin.isEnabled()
    window.settle()
    assert enabled_ink >= 4.5 and text_ink(spin) < 3.0  # greyed as the Step and Run labels are
