"""The registry: no trace after detaching, refusals with reasons, recovery from hook errors."""

from __future__ import annotations

import gc
import tracemalloc

import pytest
import torch
from torch import nn

from gradexplorer.core.hooks import HookRegistry, hookable_modules
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.session.engine import SessionConfig, TrainingSession
from tests.hooks_helpers import (
    GradRecorder,
    hook_state,
    inplace_workload,
    lenet_session,
    run_with_hooks,
)

ACTIONS = ("observe:capture", "scale:0.5", "block", "clip:1.0", "noise:0.1", "once:block")


def cycle(registry: HookRegistry, times: int) -> None:
    for i in range(times):
        registry.attach(("fc1", "fc2", "conv2")[i % 3], ACTIONS[i % len(ACTIONS)])
        if i % 2:
            registry.attach("fc3", "observe")
        registry.detach_all() if i % 5 == 0 else registry.detach(("fc1", "fc2", "conv2")[i % 3])
        registry.detach("fc3")


def test_attach_detach_a_thousand_times_leaves_no_trace():
    session = lenet_session()
    model = session.model
    before = hook_state(model)
    registry = HookRegistry(model, sample_inputs=session.batch(0)[0])
    registry.attach("fc1", "scale:0.5")
    session.forward_loss().backward()  # hooks that have fired must come off as cleanly
    registry.detach("fc1")
    tracemalloc.start()
    cycle(registry, 300)  # warm up: fills the bounded event list
    gc.collect()
    start = tracemalloc.take_snapshot()
    cycle(registry, 1000)
    gc.collect()
    growth = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(start, "filename"))
    tracemalloc.stop()
    assert growth < 32_000, f"memory grew by {growth} bytes over 1000 attach/detach cycles"
    assert hook_state(model) == before
    assert registry.attached() == {} and len(registry.events) <= 1000
    model.fc1.register_backward_hook(lambda *a: None)  # flag restored: old-style hooks allowed


def test_an_attached_hook_keeps_old_style_hooks_off_its_module_as_pytorch_does():
    model = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))
    registry = HookRegistry(model)
    registry.attach("1", "observe")
    with pytest.raises(RuntimeError, match="Cannot use both regular backward hooks"):
        model[1].register_backward_hook(lambda *a: None)
    registry.detach("1")
    model[1].register_backward_hook(lambda *a: None)


def test_the_event_signal_gives_kind_module_and_message():
    session = lenet_session()
    registry = HookRegistry(session.model)
    seen = []
    registry.event.connect(lambda *event: seen.append(event))
    registry.attach("fc2", "scale:2")
    registry.attach("fc2", "block")  # replaces
    registry.detach("fc2")
    assert [(k, m) for k, m, _ in seen] == [
        ("attached", "fc2"), ("detached", "fc2"), ("attached", "fc2"), ("detached", "fc2")
    ]
    assert seen[1][2] == "hook scale:2 on 'fc2' replaced"
    assert registry.events == [message for _, _, message in seen]
    assert registry.detach("fc2") is None


def test_attach_between_steps_applies_to_the_next_step():
    session = lenet_session()
    registry = HookRegistry(session.model)
    registry.install(session)
    assert session.step().hooks is None  # no hook yet
    registry.attach("fc1", "observe")
    result = session.step()
    assert result.hooks == [{"module": "fc1", "action": "observe", "calls": 1}]


def test_unknown_module_and_action_are_user_errors():
    registry = HookRegistry(lenet_session().model)
    with pytest.raises(UserError, match="did you mean fc1"):
        registry.attach("fc_1", "observe")
    with pytest.raises(UserError, match="unknown hook action 'halve'"):
        registry.attach("fc1", "halve")
    with pytest.raises(UserError, match="once:ACTION"):
        registry.attach("fc1", "once:once:block")


class DictOut(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return {"features": self.fc(x)}


class UsesDict(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(4, 4)
        self.body = DictOut()

    def forward(self, x):
        return self.body(self.inp(x))["features"]


def test_module_returning_a_dict_is_refused_with_the_reason():
    model, x = UsesDict(), torch.randn(2, 4)
    registry = HookRegistry(model, sample_inputs=(x,))
    with pytest.raises(UserError, match="'body'.*returns a dict.*never fire"):
        registry.attach("body", "observe")
    registry.attach("body.fc", "scale:0.5")  # inside it, tensors flow: fine
    rows = {row.path: row for row in hookable_modules(model, (x,))}
    assert not rows["body"].safe and "dict" in rows["body"].reason
    assert rows["body.fc"].safe and rows["inp"].safe


def test_root_module_explains_grad_input_is_none():
    session = lenet_session()
    registry = HookRegistry(session.model)
    registry.install(session)
    with pytest.raises(UserError, match=r"grad_input is \(None,\)"):
        registry.attach("<root>", "scale:0.5")
    hook = registry.attach("", "observe")
    assert "grad_input is (None,)" in registry.events[-1]
    session.step()
    assert hook.calls == 1
    stats = hook.last_stats
    assert stats["grad_input"] == [None] and stats["grad_output"][0]["norm"] > 0


def test_mixing_with_old_style_hooks_is_refused():
    model = lenet_session().model
    handle = model.fc2.register_backward_hook(lambda module, gi, go: None)
    registry = HookRegistry(model)
    with pytest.raises(UserError, match="old-style register_backward_hook"):
        registry.attach("fc2", "observe")
    assert not {row.path: row for row in hookable_modules(model)}["fc2"].safe
    handle.remove()


def test_inplace_case_is_detected_reported_and_survived():
    workload = inplace_workload()
    rows = {row.path: row for row in hookable_modules(workload.model, (workload.make_batch(0)[0],))}
    assert not rows["1"].safe and "in place" in rows["1"].reason
    assert not rows["2"].safe and rows["3"].safe

    plain = TrainingSession(inplace_workload(), SessionConfig(device="cpu"))
    plain_grads = GradRecorder()
    plain.add_observer(plain_grads)
    plain_losses = [r.loss for r in plain.run(3)]

    session = TrainingSession(workload, SessionConfig(device="cpu"))
    registry = HookRegistry(session.model)
    registry.install(session)
    registry.attach("1", "scale:0.5")
    registry.attach("3", "observe")
    kinds = []
    registry.event.connect(lambda kind, module, message: kinds.append((kind, module)))
    recorder = GradRecorder()
    session.add_observer(recorder)
    losses = [r.loss for r in session.run(3)]
    assert kinds == [("failed", "1")]
    assert "'1'" in registry.events[-1] and "modified in place" in registry.events[-1]
    assert "BackwardHookFunction is a view" in registry.events[-1]
    assert list(registry.attached()) == ["3"] and registry.attached()["3"].calls == 3
    assert losses == plain_losses
    for got, ref in zip(recorder.grads, plain_grads.grads, strict=True):
        assert all(torch.equal(got[n], ref[n]) for n in ref)


def test_without_install_the_inplace_error_reaches_the_caller():
    workload = inplace_workload()
    session = TrainingSession(workload, SessionConfig(device="cpu"))
    HookRegistry(session.model).attach("1", "observe")
    with pytest.raises(UserError, match="BackwardHookFunction is a view"):
        session.step()


def test_step_results_name_the_hooks():
    recorder, registry = run_with_hooks({"fc1": "observe", "fc3": "scale:1"}, steps=2)
    assert registry.describe() == [
        {"module": "fc1", "action": "observe", "calls": 2},
        {"module": "fc3", "action": "scale:1", "calls": 2},
    ]


def test_the_probe_leaves_batchnorm_statistics_and_random_state_alone():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.5), nn.Linear(8, 2))
    x = torch.randn(6, 4)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    rng = torch.get_rng_state()
    registry = HookRegistry(model, sample_inputs=(x,))
    registry.attach("3", "observe")
    rows = registry.hookable()
    assert [r.path for r in rows] == ["", "0", "1", "2", "3"] and all(r.safe for r in rows)
    assert torch.equal(torch.get_rng_state(), rng)
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
    model(x).sum().backward()
    assert registry.attached()["3"].calls == 1  # the probe put the registry's hook back


def _tiny_and_grads(registry_hooks):
    """``0.weight``'s gradient of a small MLP with the hooks ``registry_hooks`` attached."""
    import gradexplorer as gx

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2))
    x = torch.randn(5, 4)
    registry = gx.hooks.HookRegistry(model, sample_inputs=(x,))
    for path, action in registry_hooks.items():
        registry.attach(path, action)
    model(x).square().sum().backward()
    return registry, model[0].weight.grad.clone()


def test_attach_takes_a_function_as_well_as_text():
    calls = []

    def halve(module, grad_input, grad_output):
        calls.append(type(module).__name__)
        return tuple(None if g is None else g * 0.5 for g in grad_input)

    registry, hooked = _tiny_and_grads({"2": halve})
    _, plain = _tiny_and_grads({})
    _, by_text = _tiny_and_grads({"2": "scale:0.5"})
    assert calls == ["Linear"] and registry.describe()[0]["action"].startswith("callable:")
    assert registry.describe()[0]["action"].endswith("halve")
    torch.testing.assert_close(hooked, plain * 0.5, rtol=0, atol=0)
    torch.testing.assert_close(hooked, by_text, rtol=0, atol=0)
    with pytest.raises(UserError, match="not int"):
        registry.attach("2", 3)


def test_a_hook_on_a_module_without_input_gradients_leaves_no_warnings_filter():
    import warnings

    filters = list(warnings.filters)
    registry, _ = _tiny_and_grads({"0": "observe", "2": "observe"})  # x needs no grad: "0" warns
    assert len(warnings.filters) == len(filters) + 1  # PyTorch's warning quieted while hooked
    registry.detach("0")
    assert warnings.filters == filters  # and nothing left once that hook is gone
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        registry.attach("0", "observe")
        registry.detach_all()
    assert warnings.filters == filters and not caught
