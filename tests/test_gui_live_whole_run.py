"""Training inside the app: the heat map covers the whole run, not the last 256 steps, while
the history stays within its bound."""

from __future__ import annotations

from tests.gui_helpers import TIMEOUT_MS, open_model, wait_idle

STEPS = 2000


def test_the_live_heat_map_covers_step_one_after_2000_steps(qtbot, make_window):
    window = make_window()
    open_model(qtbot, window, "example:mlp", batch_size=8)
    timeline = window.controller.timeline
    window.controller.run(STEPS)
    qtbot.waitUntil(lambda: timeline.latest is not None and timeline.latest.step == STEPS,
                    timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    history = timeline.gradients
    bound = window.controller.live.monitor.history.maxlen
    assert len(history) <= bound < STEPS  # memory: at most the bound's columns
    name = history.latest().columns()[0][0]
    window.selection.select(param=name, source="test")
    window.settle()
    window.gradients.refresh_heatmap()
    shown = window.gradients.heatmap.shown[1].tolist()
    assert shown[0] == 1 and shown[-1] == STEPS and len(shown) <= bound
    assert shown == history.steps()  # the columns are the steps held, labelled by number
    assert len(window.controller.live.monitor.history) == bound  # the monitor's own ring: full
