"""``SessionObserver``: a session looks up an observer's hooks once, when it is added, and an
observer (or a part of the session's stack) that raises is one warning, the step completing."""

from pathlib import Path

import pytest

import gradexplorer as gx
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.stack.assembly import SessionStack
from gradexplorer.core.stack.observer import SessionObserver

MLP = f"{Path(__file__).parent / 'data' / 'nan_sqrt_model.py'}:build"


def session() -> gx.TrainingSession:
    return gx.TrainingSession(gx.load_workload(MLP), gx.session.SessionConfig(device="cpu"))


class StepsOnly:
    """An observer with ``after_step`` only, counting every attribute looked up on it."""

    def __init__(self) -> None:
        self.looked_up: list[str] = []
        self.steps: list[int] = []

    def __getattr__(self, name):  # called only for what the instance lacks
        self.looked_up.append(name)
        raise AttributeError(name)

    def after_step(self, session, result) -> None:
        self.steps.append(result.step)


class Failing:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def after_step(self, session, result) -> None:
        raise self.error


def test_an_observer_lacking_a_hook_is_looked_up_once_not_every_step():
    s, observer = session(), StepsOnly()
    s.add_observer(observer)
    assert observer.looked_up == ["after_backward"]  # resolved when added
    for _ in range(3):
        s.step()
    assert observer.steps == [1, 2, 3] and observer.looked_up == ["after_backward"]
    s.remove_observer(observer)
    s.step()
    assert observer.steps == [1, 2, 3] and s.observers == []


def test_a_raising_observer_is_one_warning_and_every_step_completes():
    s, after = session(), StepsOnly()
    s.add_observer(Failing(ValueError("the observer's own bug")))
    s.add_observer(after)
    with pytest.warns(RuntimeWarning, match="Failing.after_step failed at step 1") as said:
        losses = [s.step().loss for _ in range(3)]
    assert len(said) == 1 and "the observer's own bug" in str(said[0].message)
    assert after.steps == [1, 2, 3] and s.step_count == 3 and len(losses) == 3


def test_a_user_error_in_an_observer_still_ends_the_step():
    s = session()
    s.add_observer(Failing(UserError("fix this")))
    with pytest.raises(UserError, match="fix this"):
        s.step()


def test_a_raising_reporter_of_the_stack_leaves_the_publishers_running(tmp_path):
    s = session()
    stack = SessionStack.on(s, gx.session.GradientMonitor(),
                            reporters=(Failing(RuntimeError("reporter down")),))
    exporter = stack.exporter(tmp_path / "snaps", snapshot_every=1, keep_snapshots=3)
    with pytest.warns(RuntimeWarning, match="reporter down") as said:
        results = [s.step() for _ in range(2)]
    assert len(said) == 1 and len(exporter.written) == 2
    assert all(r.gradients is not None for r in results)
    assert isinstance(stack, SessionObserver) and s.observers == [stack]
