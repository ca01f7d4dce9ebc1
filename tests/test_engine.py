"""The step engine: ordering, repeatability, pause/stop, queued commands, devices."""

import re
import threading

import pytest
import torch

from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.model.spec import ModelOptions, load_workload
from gradexplorer.core.session.devices import available_devices, resolve_device, unavailable_devices
from gradexplorer.core.session.engine import RunControl, SessionConfig, TrainingSession, run_steps


def lenet_session(seed=0, **config):
    workload = load_workload("example:lenet", ModelOptions(seed=seed))
    return TrainingSession(workload, SessionConfig(device="cpu", seed=seed, **config))


def test_same_seed_same_run_and_other_seed_differs():
    a = [r.loss for r in lenet_session(seed=3).run(3)]
    b = [r.loss for r in lenet_session(seed=3).run(3)]
    c = [r.loss for r in lenet_session(seed=4).run(3)]
    assert a == b and a != c


def test_step_is_zero_grad_forward_backward_update():
    session = lenet_session()
    before = session.model.fc3.weight.detach().clone()
    seen = {}

    class Spy:
        def after_backward(self, s, step):
            seen["grad"] = s.model.fc3.weight.grad.detach().clone()
            seen["unchanged"] = torch.equal(s.model.fc3.weight.detach(), before)

    session.add_observer(Spy())
    session.step()
    lr = session.optimizer.param_groups[0]["lr"]
    assert seen["unchanged"]  # observers see the gradient before the update
    torch.testing.assert_close(session.model.fc3.weight.detach(), before - lr * seen["grad"])


def test_gradients_do_not_accumulate_across_steps():
    session = lenet_session(lr=1e-12)
    session.step()
    first = session.model.conv1.bias.grad.clone()
    session.step()
    torch.testing.assert_close(session.model.conv1.bias.grad, first, rtol=1e-4, atol=1e-8)


def test_adam_and_learning_rate():
    session = lenet_session(optimizer="adam", lr=0.002)
    assert isinstance(session.optimizer, torch.optim.Adam)
    session.set_lr(0.01)
    assert session.optimizer.param_groups[0]["lr"] == 0.01
    with pytest.raises(UserError, match="unknown optimizer"):
        lenet_session(optimizer="lbfgs")
    with pytest.raises(UserError, match="positive"):
        lenet_session(lr=-1.0)


def test_stop_and_pause_between_steps():
    session = lenet_session()
    control = RunControl()
    got = []
    for result in session.run(None, control):
        got.append(result.step)
        if result.step == 3:
            control.stop()
    assert got == [1, 2, 3]

    control = RunControl()
    control.pause()
    steps = []
    thread = threading.Thread(target=lambda: steps.extend(r.step for r in session.run(2, control)))
    thread.start()
    thread.join(0.3)
    assert thread.is_alive() and steps == []  # paused: no step ran
    control.resume()
    thread.join(30)
    assert steps == [4, 5]


def test_devices():
    assert resolve_device("cpu") == torch.device("cpu")
    assert "cpu" in available_devices()
    assert resolve_device("auto").type in {"cpu", "cuda", "mps"}
    with pytest.raises(UserError, match="unknown device"):
        resolve_device("tpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_absent_cuda_is_a_clear_error():
    with pytest.raises(UserError, match="device 'cuda:1' is not available"):
        TrainingSession(load_workload("example:lenet"), SessionConfig(device="cuda:1"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_session_steps():
    session = TrainingSession(load_workload("example:lenet"), SessionConfig(device="cuda"))
    result = session.step()
    assert session.model.fc1.weight.device.type == "cuda" and result.loss > 0


def test_absent_device_kinds_come_with_a_reason():
    reasons = unavailable_devices()
    present = available_devices()
    assert ("cuda" in reasons) == (not any(n.startswith("cuda") for n in present))
    assert ("mps" in reasons) == ("mps" not in present)
    if torch.version.cuda is None and "cuda" in reasons:
        assert "built without CUDA" in reasons["cuda"]
    for why in reasons.values():
        assert why and "\n" not in why
    if "cuda" in reasons:
        with pytest.raises(UserError, match=re.escape(reasons["cuda"])):
            resolve_device("cuda")


def test_run_steps_calls_between_before_each_step_and_while_paused():
    control, calls, steps = RunControl(), [], []
    control.pause()

    def between() -> bool:  # the app's queued jobs: here, resume after three calls while paused
        calls.append((len(steps), control.paused))
        if len(calls) == 3:
            control.resume()
        return len(steps) == 2  # True: end the run before a third step

    assert list(run_steps(lambda: steps.append(1) or len(steps), 5, control, between)) == [1, 2]
    assert calls == [(0, True), (0, True), (0, True), (1, False), (2, False)]
