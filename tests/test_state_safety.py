"""A recovered step is the step the model would have taken; loading a module does not move it."""

from __future__ import annotations

import json

import torch
from torch import nn

from gradexplorer import load_workload
from gradexplorer.core.hooks import HookRegistry
from gradexplorer.core.model.workload import Workload
from gradexplorer.core.session.engine import SessionConfig, TrainingSession
from gradexplorer.session import ModelOptions


def bn_dropout_inplace_workload() -> Workload:
    """BatchNorm + Dropout around a Linear whose output ReLU(inplace=True) modifies."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 8), nn.ReLU(inplace=True),
        nn.Dropout(0.5), nn.Linear(8, 1),
    )
    gen = torch.Generator().manual_seed(0)
    x, target = torch.randn(16, 4, generator=gen), torch.randn(16, 1, generator=gen)
    return Workload(model, lambda step: (x, target), nn.MSELoss(), name="bn-dropout-inplace")


def test_inplace_recovery_is_bit_identical_to_the_hook_free_step():
    plain = TrainingSession(bn_dropout_inplace_workload(), SessionConfig(device="cpu"))
    plain_losses = [plain.step().loss for _ in range(2)]
    plain_state = {k: v.clone() for k, v in plain.model.state_dict().items()}

    session = TrainingSession(bn_dropout_inplace_workload(), SessionConfig(device="cpu"))
    registry = HookRegistry(session.model)
    registry.install(session)
    registry.attach("2", "scale:0.5")  # full backward hook beside ReLU(inplace=True)
    first = session.step()
    assert "2" not in registry.attached() and "detached" in registry.events[-1]
    assert int(session.model[1].num_batches_tracked) == 1
    assert first.loss == plain_losses[0]
    assert session.step().loss == plain_losses[1]
    for name, value in session.model.state_dict().items():
        assert torch.equal(value, plain_state[name]), name
    assert torch.equal(torch.random.get_rng_state(), _rng_after(plain_losses))


def _rng_after(_losses) -> torch.Tensor:
    """The CPU RNG state after two hook-free steps of the same workload."""
    plain = TrainingSession(bn_dropout_inplace_workload(), SessionConfig(device="cpu"))
    plain.step()
    plain.step()
    return torch.random.get_rng_state()


def test_loading_a_bare_module_leaves_its_buffers_alone(tmp_path):
    (tmp_path / "bn_model.py").write_text(
        "from torch import nn\n"
        "def build():\n"
        "    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))\n"
    )
    workload = load_workload(f"{tmp_path / 'bn_model.py'}:build", ModelOptions(input_shape=(8, 4)))
    bn = workload.model[1]
    assert workload.model.training
    assert int(bn.num_batches_tracked) == 0
    assert torch.equal(bn.running_mean, torch.zeros(8))
    assert torch.equal(bn.running_var, torch.ones(8))
    session = TrainingSession(workload, SessionConfig(device="cpu"))
    session.step()
    assert int(bn.num_batches_tracked) == 1


def test_a_snapshot_names_the_once_hook_that_shaped_its_gradients(run_cli, tmp_path):
    out = tmp_path / "out"
    code, _, err = run_cli("run", "--model", "example:lenet", "--steps", "2", "--hook",
                           "fc1=once:scale:0.5", "--hook", "fc2=observe", "--export", out,
                           "--snapshot-every", "1")
    assert code == 0, err
    first = json.loads((out / "step-000001" / "manifest.json").read_text())
    second = json.loads((out / "step-000002" / "manifest.json").read_text())
    assert first["hooks"] == [
        {"module": "fc1", "action": "once:scale:0.5", "calls": 1},
        {"module": "fc2", "action": "observe", "calls": 1},
    ]
    assert second["hooks"] == [{"module": "fc2", "action": "observe", "calls": 2}]


def test_hooks_that_stay_are_rolled_back_when_a_step_is_redone(tmp_path):
    from tests.hooks_helpers import GradRecorder, lenet_session

    hooks_file = tmp_path / "bad.py"
    hooks_file.write_text("def explode(module, grad_input, grad_output):\n    raise RuntimeError('x')\n")
    runs = []
    for failing in (False, True):
        session = lenet_session()
        registry = HookRegistry(session.model)
        registry.install(session)
        registry.attach("fc2", "once:scale:0.5")
        registry.attach("fc1", "noise:0.1")
        if failing:  # conv2's hook fires after fc2's and fc1's in the backward pass, then raises
            registry.attach("conv2", f"file:{hooks_file}:explode")
        recorder = GradRecorder()
        session.add_observer(recorder)
        losses = [r.loss for r in session.run(2)]
        runs.append((losses, recorder.grads, registry.describe()))
    (plain_losses, plain_grads, plain_hooks), (losses, grads, hooks) = runs
    assert losses == plain_losses and hooks == plain_hooks
    assert hooks == [{"module": "fc1", "action": "noise:0.1", "calls": 2}]  # once: acted, left
    for got, ref in zip(grads, plain_grads, strict=True):
        assert all(torch.equal(got[n], ref[n]) for n in ref)


def test_diagnosing_a_failed_forward_leaves_the_buffers_alone():
    from gradexplorer.core.model.forward_check import locate_forward_failure

    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(7, 2))  # fails at [2]
    failure = locate_forward_failure(model, (torch.randn(8, 4),))
    assert failure is not None and "module '2'" in str(failure)
    assert int(model[1].num_batches_tracked) == 0 and torch.equal(model[1].running_mean, torch.zeros(8))
