"""Each hook action, proved numerically against the same seeded LeNet run without hooks."""

from __future__ import annotations

import textwrap

import pytest
import torch

from gradexplorer.core.hooks import HookFailure, HookRegistry
from tests.hooks_helpers import lenet_session, run_with_hooks

CONV = ("conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias")
FC = ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias")


@pytest.fixture(scope="module")
def plain():
    """Gradients of two LeNet steps with no hooks (and the parameters after each step)."""
    recorder, _ = run_with_hooks({}, steps=2)
    assert all(recorder.grads[0][n].abs().sum() > 0 for n in CONV + FC)
    return recorder


def test_scale_halves_upstream_gradients_exactly(plain):
    recorder, registry = run_with_hooks({"fc1": "scale:0.5"})
    got, ref = recorder.grads[0], plain.grads[0]
    for name in FC:
        assert torch.equal(got[name], ref[name]), name
    for name in CONV:
        assert torch.equal(got[name], ref[name] * 0.5), name
    assert registry.attached()["fc1"].calls == 1


def test_block_leaves_upstream_parameters_without_gradient(plain):
    recorder, _ = run_with_hooks({"fc1": "block"})
    got = recorder.grads[0]
    for name in CONV:
        assert got[name] is None, name
    for name in FC:
        assert torch.equal(got[name], plain.grads[0][name]), name


def test_once_acts_on_the_first_step_only(plain):
    recorder, registry = run_with_hooks({"fc1": "once:scale:0.5"}, steps=2)
    for name in CONV:
        assert torch.equal(recorder.grads[0][name], plain.grads[0][name] * 0.5), name
    assert registry.attached() == {}
    assert "acted once and detached" in registry.events[-1]
    # step 2 must equal a hook-free step from the same parameters
    fresh = lenet_session()
    fresh.model.load_state_dict(recorder.params_after[0])
    fresh.step_count = 1
    reference, _ = run_with_hooks({}, session=fresh)
    for name in CONV + FC:
        assert torch.equal(recorder.grads[1][name], reference.grads[0][name]), name
    assert not fresh.model.fc1._backward_hooks


def test_clip_bounds_the_input_gradient_norm(plain):
    _, observed = run_with_hooks({"fc1": "observe"})
    norm = observed.attached()["fc1"].last_stats["grad_input"][0]["norm"]
    limit = norm / 4
    recorder, registry = run_with_hooks({"fc1": f"clip:{limit}"})
    for name in CONV:
        torch.testing.assert_close(recorder.grads[0][name], plain.grads[0][name] * (limit / norm))
    assert registry.attached()["fc1"].last_stats["norm_before"] == pytest.approx(norm)
    loose, _ = run_with_hooks({"fc1": f"clip:{norm * 4}"})
    for name in CONV:
        assert torch.equal(loose.grads[0][name], plain.grads[0][name]), name


def test_noise_is_seeded_and_reproducible(plain):
    first, _ = run_with_hooks({"fc1": "noise:0.01"})
    second, _ = run_with_hooks({"fc1": "noise:0.01"})
    other_seed, _ = run_with_hooks({"fc1": "noise:0.01:7"})
    name = "conv2.weight"
    assert torch.equal(first.grads[0][name], second.grads[0][name])
    assert not torch.equal(first.grads[0][name], plain.grads[0][name])
    assert not torch.equal(first.grads[0][name], other_seed.grads[0][name])
    assert torch.equal(first.grads[0]["fc1.weight"], plain.grads[0]["fc1.weight"])


def test_observe_changes_nothing_and_captures_tensors(plain):
    recorder, registry = run_with_hooks({"fc2": "observe:capture"})
    for name in CONV + FC:
        assert torch.equal(recorder.grads[0][name], plain.grads[0][name]), name
    captured = registry.captured_tensors()
    assert set(captured) == {"hooks/fc2/grad_input.0", "hooks/fc2/grad_output.0"}
    grad_in, grad_out = captured["hooks/fc2/grad_input.0"], captured["hooks/fc2/grad_output.0"]
    assert grad_in.shape == (1, 120) and grad_out.shape == (1, 84)
    stats = registry.attached()["fc2"].last_stats
    assert stats["grad_input"][0]["norm"] == pytest.approx(float(grad_in.norm()))
    assert stats["grad_output"][0]["abs_max"] == pytest.approx(float(grad_out.abs().max()))
    assert registry.describe() == [{"module": "fc2", "action": "observe:capture", "calls": 1}]


def test_observe_matches_the_chain_rule():
    session = lenet_session()
    registry = HookRegistry(session.model)
    registry.attach("fc2", "observe:capture")
    weight = session.model.fc2.weight.detach().clone()
    session.forward_loss().backward()
    captured = registry.captured_tensors()
    expected = captured["hooks/fc2/grad_output.0"] @ weight
    torch.testing.assert_close(captured["hooks/fc2/grad_input.0"], expected)


def write_hooks_file(tmp_path):
    path = tmp_path / "userhooks.py"
    path.write_text(textwrap.dedent("""
        def halve(module, grad_input, grad_output):
            return tuple(None if g is None else g * 0.5 for g in grad_input)

        def tutorial_mistake(module, grad_input, grad_output):
            return grad_input, grad_output

        def explode(module, grad_input, grad_output):
            raise ValueError("no thanks")
    """))
    return path


def test_user_hook_file_works(tmp_path, plain):
    path = write_hooks_file(tmp_path)
    recorder, _ = run_with_hooks({"fc1": f"file:{path}:halve"})
    for name in CONV:
        assert torch.equal(recorder.grads[0][name], plain.grads[0][name] * 0.5), name


def test_user_hook_bad_return_value_is_a_clear_error(tmp_path):
    path = write_hooks_file(tmp_path)
    session = lenet_session()
    registry = HookRegistry(session.model)  # not installed: the error reaches the caller
    registry.attach("fc1", f"file:{path}:tutorial_mistake")
    with pytest.raises(HookFailure, match=r"returned 2 entries but grad_input has 1") as info:
        session.forward_loss().backward()
    assert "'fc1'" in str(info.value) and "\n" not in str(info.value)


def test_user_hook_failures_are_reported_detached_and_survived(tmp_path, plain):
    path = write_hooks_file(tmp_path)
    recorder, registry = run_with_hooks(
        {"fc1": f"file:{path}:tutorial_mistake", "fc2": f"file:{path}:explode"}, steps=2
    )
    assert registry.attached() == {}
    failed = [e for e in registry.events if "detached:" in e]
    assert any("'fc2'" in e and "raised at userhooks.py:9: ValueError: no thanks" in e
               for e in failed), failed
    assert any("'fc1'" in e and "returned 2 entries" in e for e in failed), failed
    for step in (0, 1):
        for name in CONV + FC:
            assert torch.equal(recorder.grads[step][name], plain.grads[step][name]), name
