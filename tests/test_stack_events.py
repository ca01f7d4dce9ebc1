"""The stack's own event signal is the app's one event bus (core/stack/events.py): a step of a
model whose gradients hold NaN tells, on one bus, the hook events, where the NaN was born, the
spike it begins, the snapshot written, the finished step, and a failing part's line; a hook
that takes itself off publishes the hook table; the app's bus outlives a change of optimizer
with its subscribers, telling each event once."""

from pathlib import Path

import pytest

import gradexplorer as gx
from gradexplorer.core.diagnose.spike_observer import SpikeObserver
from gradexplorer.core.stack.assembly import SessionStack
from gradexplorer.session import MonitorWarning

NAN_MODEL = f"{Path(__file__).parent / 'data' / 'nan_sqrt_model.py'}:build"


class Broken:
    """A reporter with a bug of its own."""

    def after_step(self, session, result):
        raise ValueError("the reporter's own bug")


def heard(events) -> dict[str, list]:
    got = {name: [] for name in ("told", "measured", "spike", "hooks", "failed")}
    for name, found in got.items():
        getattr(events, name).connect(lambda *args, found=found: found.append(args))
    return got


def test_one_step_tells_everything_on_the_stack_bus(tmp_path):
    session = gx.TrainingSession(gx.load_workload(NAN_MODEL), gx.session.SessionConfig(device="cpu"))
    hooks = gx.hooks.HookRegistry(session.model)
    spikes = SpikeObserver()
    stack = SessionStack.on(session, gx.session.GradientMonitor(), hooks,
                            reporters=(spikes, Broken()))
    stack.exporter(tmp_path / "snaps", snapshot_every=1)
    got = heard(stack.events)
    hooks.attach("act", "observe")
    with pytest.warns(MonitorWarning, match="the reporter's own bug"):
        result = session.step()
    kinds = [kind for kind, _, _ in got["told"]]
    assert kinds[0] == "attached" and {"spike", "snapshot", "error"} <= set(kinds)
    assert ("error", "act", "step 1: first non-finite gradient: SqrtBackward0 in module act at "
            "nan_sqrt_model.py:17") in got["told"]  # the NaN origin's line
    assert ("spike", "fc", f"spike at {result.spike.summary()}") in got["told"]
    assert got["measured"] == [(result,)] and result.gradients is not None
    assert got["spike"] == [(result.spike, 1)] and spikes.events == [result.spike]
    assert len(got["failed"]) == 1 and "Broken.after_step failed at step 1" in got["failed"][0][0]
    assert ("error", "", got["failed"][0][0]) in got["told"]  # and a red line in the event log
    hooks.detach("act")
    assert got["told"][-1][0] == "detached" and got["hooks"] == [({},)]


def test_the_apps_bus_outlives_a_new_optimizer_and_tells_each_event_once():
    from gradexplorer.gui.training.live_session import give_cores_back, open_live_session, reconfigure

    live = open_live_session("example:mlp", gx.session.ModelOptions(),
                             gx.session.SessionConfig(device="cpu"))
    try:
        bus = live.stack.events
        got = heard(bus)
        new = reconfigure(live, optimizer="adam")
        assert new.stack.events is bus and new.stack is not live.stack
        new.hooks.attach("fc1", "observe")
        result = new.session.step()
        assert [kind for kind, _, _ in got["told"]].count("attached") == 1  # not once a stack
        assert got["measured"] == [(result,)]
    finally:
        live.hooks.detach_all()
        give_cores_back(None)
