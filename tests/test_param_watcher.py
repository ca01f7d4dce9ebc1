"""Per-parameter gradient norms from post-accumulate-grad hooks, without module hooks."""

from __future__ import annotations

import pytest
import torch

from gradexplorer.core.hooks import HookRegistry, ParameterGradientWatcher
from tests.hooks_helpers import GradRecorder, hook_state, lenet_session


def test_watcher_reports_every_gradient_norm_and_leaves_no_hooks():
    session = lenet_session()
    before = hook_state(session.model)
    watcher = ParameterGradientWatcher(session.model).attach()
    recorder = GradRecorder()
    session.add_observer(recorder)
    session.add_observer(watcher)
    result = session.step()
    norms = result.param_grad_norms
    assert set(norms) == {n for n, _ in session.model.named_parameters()}
    for name, grad in recorder.grads[0].items():
        assert norms[name] == pytest.approx(float(torch.linalg.vector_norm(grad)), rel=1e-6)
    assert hook_state(session.model) == before  # no module hooks involved
    watcher.detach()
    assert all(not p._post_accumulate_grad_hooks for p in session.model.parameters())


def test_watcher_sees_blocked_parameters_as_without_gradient():
    session = lenet_session()
    registry = HookRegistry(session.model)
    registry.attach("fc1", "block")
    with ParameterGradientWatcher(session.model, ["conv1.weight", "fc1.weight"]) as watcher:
        session.forward_loss().backward()
        norms = watcher.norms()
    assert norms["conv1.weight"] is None and norms["fc1.weight"] > 0


def test_watcher_rejects_unknown_names():
    with pytest.raises(KeyError, match="conv9.weight"):
        ParameterGradientWatcher(lenet_session().model, ["conv9.weight"])
