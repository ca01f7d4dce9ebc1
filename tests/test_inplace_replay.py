"""A step redone after a full backward hook broke it (an in-place op beside the hooked module,
a hook that raised) is the step a loop that never had the hook takes: same batch, random
numbers, BatchNorm (and other) buffers, gradients and optimizer state, bit for bit."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook

import gradexplorer as gx
from gradexplorer.core.hooks import HookRegistry
from gradexplorer.core.model.workload import Workload
from gradexplorer.core.session.engine import SessionConfig, TrainingSession
from gradexplorer.core.stack.assembly import SessionStack
from gradexplorer.session import MonitorWarning
from tests import inplace_models
from tests.inplace_models import HOOKED

STEPS = 3
OPTIMIZERS = {"sgd-momentum": ("sgd", 0.9), "adam": ("adam", None)}


def new_session(build, optimizer: str) -> TrainingSession:
    name, momentum = OPTIMIZERS[optimizer]
    return TrainingSession(build(), SessionConfig(device="cpu", optimizer=name, momentum=momentum))


def seeded_losses(session: TrainingSession, steps: int = STEPS) -> list[float]:
    """The loop: seeded once everything is set up, then ``steps`` steps."""
    torch.manual_seed(1234)
    return [session.step().loss for _ in range(steps)]


def assert_same_training(model: nn.Module, optimizer, ref_model: nn.Module, ref_optimizer) -> None:
    """Every parameter, buffer, gradient and optimizer state equal, bit for bit."""
    state, ref_state = model.state_dict(), ref_model.state_dict()
    assert list(state) == list(ref_state)
    for name, value in state.items():
        assert torch.equal(value, ref_state[name]), name
    for (name, p), (_, ref) in zip(model.named_parameters(), ref_model.named_parameters(), strict=True):
        assert (p.grad is None) == (ref.grad is None), name
        assert p.grad is None or torch.equal(p.grad, ref.grad), f"{name}.grad"
    opt, ref_opt = optimizer.state_dict(), ref_optimizer.state_dict()
    assert opt["param_groups"] == ref_opt["param_groups"]
    assert opt["state"].keys() == ref_opt["state"].keys() and opt["state"]
    for index, entry in opt["state"].items():
        assert entry.keys() == ref_opt["state"][index].keys()
        for key, value in entry.items():
            assert torch.equal(torch.as_tensor(value), torch.as_tensor(ref_opt["state"][index][key])), \
                f"optimizer state {index}.{key}"


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
@pytest.mark.parametrize("build", HOOKED, ids=lambda b: b.__name__.removeprefix("build_"))
@pytest.mark.parametrize("wiring", ["stack", "install"])
def test_the_redone_step_is_the_hook_free_step(build, optimizer, wiring):
    plain = new_session(build, optimizer)
    plain_losses = seeded_losses(plain)
    plain_rng = torch.random.get_rng_state()

    session = new_session(build, optimizer)
    registry = HookRegistry(session.model)
    if wiring == "stack":
        SessionStack.on(session, hooks=registry)
    else:
        registry.install(session)
    path = HOOKED[build]
    registry.attach(path, "scale:0.5")
    failed = []
    registry.event.connect(lambda kind, module, message: failed.append(module) if kind == "failed" else None)
    losses = seeded_losses(session)

    assert failed == [path] and not registry.attached()
    assert losses == plain_losses
    assert_same_training(session.model, session.optimizer, plain.model, plain.optimizer)
    assert torch.equal(torch.random.get_rng_state(), plain_rng)


def test_a_buffer_the_forward_replaces_is_put_back():
    """RunningNorm replaces its buffers (``self.count = self.count + 1``) before the hooked
    BatchNorm's in-place ReLU fails: the redo starts from the buffers as they were."""
    session = new_session(inplace_models.build_bn_cnn, "sgd-momentum")
    registry = HookRegistry(session.model)
    SessionStack.on(session, hooks=registry)
    registry.attach("2", "scale:0.5")
    session.step()
    assert not registry.attached()
    assert int(session.model[0].count) == 1 and int(session.model[2].num_batches_tracked) == 1


class Probed(nn.Module):
    """Linear → Linear (hook raises) → ReLU → probe Linear (outside the optimizer: its gradient
    adds up from step to step, as in a loop accumulating gradients) → head Linear."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(5, 8), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        return self.head(self.body(x))


def probed_session() -> TrainingSession:
    torch.manual_seed(0)
    model = Probed()
    gen = torch.Generator().manual_seed(2)
    x, y = torch.randn(6, 5, generator=gen), torch.randn(6, 1, generator=gen)
    session = TrainingSession(Workload(model, lambda step: (x, y), nn.MSELoss(), name="probed"),
                              SessionConfig(device="cpu"))
    trained = [*model.body[0].parameters(), *model.body[1].parameters(), *model.head.parameters()]
    session.optimizer = torch.optim.SGD(trained, lr=0.05, momentum=0.9)
    return session


def test_a_backward_that_failed_half_way_leaves_no_gradient_behind():
    plain = probed_session()
    plain_losses = seeded_losses(plain)

    session = probed_session()
    registry = HookRegistry(session.model)
    SessionStack.on(session, hooks=registry)

    def explode(module, grad_input, grad_output):
        raise RuntimeError("boom")

    registry.attach("body.1", explode)  # fires after the probe and head gradients accumulated
    losses = seeded_losses(session)
    assert not registry.attached() and "boom" in registry.events[-1]
    assert losses == plain_losses
    assert_same_training(session.model, session.optimizer, plain.model, plain.optimizer)


def _cli_run(run_cli, build, optimizer: str, hook: str | None):
    """``gradexplorer run`` on ``build``: (losses as printed, model, optimizer)."""
    name, momentum = OPTIMIZERS[optimizer]
    seen = []
    handle = register_optimizer_step_post_hook(
        lambda opt, args, kwargs: seen.append(opt))
    args = ["run", "--model", f"tests.inplace_models:{build.__name__}", "--steps", STEPS,
            "--device", "cpu", "--optimizer", name]
    args += ["--momentum", momentum] if momentum else []
    args += [f"--hook={hook}=scale:0.5"] if hook else []
    try:
        code, out, err = run_cli(*args)
    finally:
        handle.remove()
    assert code == 0, err
    losses = re.findall(r"^step \d+/\d+\s+loss (\S+)", out, re.M)
    assert len(losses) == STEPS and len(set(map(id, seen))) == 1
    return out, losses, inplace_models.BUILT[-1], seen[0]


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
@pytest.mark.parametrize("build", HOOKED, ids=lambda b: b.__name__.removeprefix("build_"))
def test_run_with_a_hook_beside_an_in_place_op_trains_as_without_it(run_cli, build, optimizer):
    _, plain_losses, plain_model, plain_opt = _cli_run(run_cli, build, optimizer, None)
    out, losses, model, opt = _cli_run(run_cli, build, optimizer, HOOKED[build])
    assert f"on '{HOOKED[build]}' detached: " in out
    assert losses == plain_losses
    assert_same_training(model, opt, plain_model, plain_opt)


def watched_loop(build, optimizer: str, hooks: dict | None, micro_batches: int = 2):
    """A loop of the user's own under ``watch``, accumulating ``micro_batches`` backwards a
    step: (losses, model, optimizer, hook events)."""
    workload = build()
    model = workload.model
    name, momentum = OPTIMIZERS[optimizer]
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=momentum) if name == "sgd" \
        else torch.optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    with gx.watch(model, opt, hooks=hooks) as rec:
        torch.manual_seed(1234)
        for step in range(STEPS):
            opt.zero_grad()
            for micro in range(micro_batches):
                x, y = workload.make_batch(step * micro_batches + micro)
                loss = workload.loss_fn(model(x), y) / micro_batches
                loss.backward()
                losses.append(loss.item())
            opt.step()
        events = list(rec.hooks.events) if rec.hooks is not None else []
    return losses, model, opt, events


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
@pytest.mark.parametrize("build", HOOKED, ids=lambda b: b.__name__.removeprefix("build_"))
def test_watch_detaches_the_hook_before_the_loop_breaks(build, optimizer):
    plain_losses, plain_model, plain_opt, _ = watched_loop(build, optimizer, None)
    plain_rng = torch.random.get_rng_state()
    with pytest.warns(MonitorWarning) as told:
        losses, model, opt, events = watched_loop(build, optimizer, {HOOKED[build]: "scale:0.5"})
    detached = [e for e in events if f"on '{HOOKED[build]}' detached: " in e and "in place" in e]
    assert len(detached) == 1
    assert [str(w.message) for w in told] == [f"gradexplorer: {detached[0]}"]
    assert losses == plain_losses
    assert_same_training(model, opt, plain_model, plain_opt)
    assert torch.equal(torch.random.get_rng_state(), plain_rng)


def test_the_guard_probes_once_and_leaves_safe_hooks_and_forward_hooks_alone():
    workload = inplace_models.build_linear_relu()
    model = workload.model
    calls = []
    model.register_forward_hook(lambda module, args, output: calls.append(output.shape))
    x, y = workload.make_batch(0)
    with pytest.warns(MonitorWarning, match="'1' detached") as told, \
            gx.watch(model, hooks={"1": "scale:0.5", "4": "observe"}) as rec:
        for _ in range(2):
            workload.loss_fn(model(x), y).backward()
            rec.step()
        assert list(rec.hooks.attached()) == ["4"] and rec.hooks.attached()["4"].calls == 2
    assert len(calls) == 2  # the probe forward is not the model's: its hooks never saw it
    assert len(told) == 1  # said once, on the one failure channel
