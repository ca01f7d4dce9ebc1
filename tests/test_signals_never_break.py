"""A subscriber that raises never breaks the training it observes: every signal of the session
stack (hook events, recorded gradients, written snapshots, NaN origins, spike events) turns its
subscriber's error into a warning and the step completes, its figures recorded."""

from pathlib import Path

import pytest

import gradexplorer as gx
from gradexplorer.core.diagnose.spike_observer import SpikeObserver
from gradexplorer.core.stack.assembly import SessionStack

NAN_MODEL = f"{Path(__file__).parent / 'data' / 'nan_sqrt_model.py'}:build"


def broken(*args) -> None:
    raise ValueError("the subscriber's own bug")


def stacked(spec: str, tmp_path, **kwargs) -> tuple[gx.TrainingSession, SessionStack]:
    session = gx.TrainingSession(gx.load_workload(spec), gx.session.SessionConfig(device="cpu"))
    hooks = gx.hooks.HookRegistry(session.model)
    stack = SessionStack.on(session, gx.session.GradientMonitor(), hooks, **kwargs)
    stack.exporter(tmp_path / "snaps", snapshot_every=1, keep_snapshots=2)
    return session, stack


@pytest.mark.parametrize("signal", ["hooks", "monitor", "exporter", "origin"])
def test_a_raising_subscriber_is_a_warning_and_the_step_completes(tmp_path, signal):
    session, stack = stacked(NAN_MODEL, tmp_path)
    exporter = stack.publishers[0]
    {"hooks": stack.hooks.event, "monitor": stack.monitor.recorded, "exporter": exporter.wrote,
     "origin": stack.origin.event}[signal].connect(broken)
    with pytest.warns(RuntimeWarning, match="the subscriber's own bug"):
        if signal == "hooks":
            stack.hooks.attach("act", "observe")  # an "attached" event at once
        result = session.step()
    assert result.gradients is not None and result.nonfinite_origin is not None
    assert len(exporter.written) == 1 and session.step_count == 1


def test_a_raising_spike_subscriber_leaves_spike_detection_on(tmp_path):
    observer = SpikeObserver()
    observer.spike.connect(broken)
    session, _ = stacked(NAN_MODEL, tmp_path, reporters=(observer,))
    with pytest.warns(RuntimeWarning, match="spike events failed"):
        first = session.step()  # NaN gradients: a spike event at step 1
    assert first.spike is not None and not observer.failed
    assert observer.events == [first.spike]
