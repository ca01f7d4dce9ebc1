"""The NaN-origin finder reads the gradient monitor's NaN/Inf counts: no check of its own.

In a session stack (the app's and ``gradexplorer run``'s) the monitor has begun measuring the
step's gradients before the origin finder runs; whether they hold NaN/Inf comes from those
figures, so a healthy step costs no extra fused norm (and on a device no extra host sync).
"""

from pathlib import Path

import pytest

import gradexplorer as gx
from gradexplorer.core.diagnose import nan_origin
from gradexplorer.core.stack.assembly import SessionStack

DATA = Path(__file__).parent / "data"
NAN_MODEL = f"{DATA / 'nan_sqrt_model.py'}:build"


def cpu_session(spec: str) -> gx.TrainingSession:
    return gx.TrainingSession(gx.load_workload(spec), gx.session.SessionConfig(device="cpu"))


@pytest.fixture
def own_checks(monkeypatch) -> list[int]:
    """Counts the origin finder's own checks (``grads_finite``: a fused norm and a sync)."""
    calls: list[int] = []
    real = nan_origin.grads_finite

    def counted(model):
        calls.append(1)
        return real(model)

    monkeypatch.setattr(nan_origin, "grads_finite", counted)
    return calls


@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_a_healthy_step_takes_no_check_of_its_own(own_checks, backend):
    session = cpu_session("example:digits")
    SessionStack.on(session, gx.session.GradientMonitor(backend=backend))
    results = [session.step() for _ in range(3)]
    assert own_checks == []
    assert all(r.nonfinite_origin is None and r.gradients.nonfinite() == {} for r in results)


def test_without_a_monitor_or_a_session_norm_it_checks_by_itself(own_checks):
    session = gx.TrainingSession(gx.load_workload("example:digits"),
                                 gx.session.SessionConfig(device="cpu", grad_norm=False))
    SessionStack.on(session, None)
    for _ in range(3):
        session.step()
    assert own_checks == [1, 1, 1]


@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_the_monitors_counts_find_the_nan_step_and_its_origin(own_checks, backend):
    session = cpu_session(NAN_MODEL)
    monitor = gx.session.GradientMonitor(backend=backend)
    SessionStack.on(session, monitor)
    result = session.step()
    assert own_checks == []
    assert result.nonfinite_origin["op"] == "SqrtBackward0"
    assert result.nonfinite_origin["module"] == "act"
    assert result.gradients.nonfinite()  # the same counts, recorded for the step


def test_a_failed_measurement_falls_back_to_its_own_check(own_checks, monkeypatch):
    session = cpu_session(NAN_MODEL)
    monitor = gx.session.GradientMonitor(backend="torch")
    SessionStack.on(session, monitor)
    session.step()  # the backend is chosen on the first step
    own_checks.clear()

    def broken(*args, **kwargs):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(monitor._backend, "begin", broken)
    with pytest.warns(RuntimeWarning, match="could not measure"):
        result = session.step()
    assert own_checks == [1]  # the monitor could not say: the finder checked by itself
    assert result.nonfinite_origin is not None


def test_the_command_lines_hooks_are_run_by_the_stack_alone():
    """``gradexplorer run --hook``: the registry recovers from hook errors but is no observer
    of its own; the session's one observer is its stack, which runs the registry's phases."""
    from gradexplorer.cli import build_parser
    from gradexplorer.commands.gradient_options import attach_gradient_options
    from gradexplorer.commands.hook_options import attach_hooks_from_args

    session = cpu_session("example:lenet")
    args = build_parser(["run"]).parse_args(["run", "--model", "example:lenet", "--hook",
                                             "fc2=scale:0.5"])
    registry = attach_hooks_from_args(session, args)
    assert registry not in session.observers
    assert registry.handle_backward_error in session.backward_error_handlers
    stack, _ = attach_gradient_options(session, args, hooks=registry)
    assert session.observers == [stack] and stack.hooks is registry
    result = session.step()
    assert [h["module"] for h in result.hooks] == ["fc2"]


def test_without_a_monitor_the_sessions_own_norm_tells(own_checks):
    """No monitor: the session's global norm of the step (queued anyway for its result) says
    the step is healthy; no second norm is taken."""
    session = cpu_session("example:digits")
    SessionStack.on(session, None)
    results = [session.step() for _ in range(3)]
    assert own_checks == [] and all(r.nonfinite_origin is None for r in results)
    assert float(session.accumulated_norm) == results[-1].grad_norm


def test_huge_finite_float64_gradients_are_no_nan_step():
    """A float64 norm overflows on finite gradients of 1e200: the step is healthy anyway."""
    import torch
    from torch import nn

    model = nn.Linear(3, 1).double()
    for p in model.parameters():
        p.grad = torch.full_like(p, 1e200)
    assert nan_origin.grads_finite(model)
    assert nan_origin.nonfinite_names(list(model.named_parameters())) == []
    model.bias.grad[0] = float("inf")
    assert not nan_origin.grads_finite(model)
    assert nan_origin.nonfinite_names([(n, p.grad) for n, p in model.named_parameters()]) == ["bias"]


def test_the_first_replayed_step_keeps_its_weights_for_a_later_trace():
    """The bad step's weights before its update are kept; ``weights_before`` swaps them in
    for a trace (the origin then shows) and gives the model its own (NaN) weights back."""
    import torch

    session = cpu_session(NAN_MODEL)
    before = {n: p.detach().clone() for n, p in session.model.named_parameters()}
    stack = SessionStack.on(session, gx.session.GradientMonitor())
    session.step()
    assert not torch.isfinite(session.model.fc.weight).all()  # the update spoilt them
    step, kept, _rng = stack.origin.replayed
    assert step == 0 and all(torch.equal(k, before[n]) for k, (n, _) in
                             zip(kept, session.model.named_parameters(), strict=True))
    with nan_origin.weights_before(session.model, stack.origin.replayed):
        G = gx.diagnose.trace_gradients(session, 0)
        assert torch.equal(session.model.fc.weight, before["fc.weight"])
    assert G.nodes[gx.diagnose.nonfinite_origin(G)]["name"] == "SqrtBackward0"
    assert not torch.isfinite(session.model.fc.weight).all()  # its own again
