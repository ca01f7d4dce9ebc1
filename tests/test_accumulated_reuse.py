"""The as-accumulated point reuses the applied point's norms only when the step's gradients are
provably the tensors backward left: proven over PROOF_STEPS steps measured at both points,
checked every VERIFY_EVERY-th step, dropped (and the step marked) on any change."""

import math

import pytest
import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.core.steps import probe as A
from gradexplorer.session import MonitorWarning


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))


def batch(i):
    g = torch.Generator().manual_seed(i)
    return torch.randn(16, 6, generator=g), torch.randn(16, 3, generator=g) * 40


def norms(model):
    return {n: float(p.grad.double().norm()) for n, p in model.named_parameters()}


def global_norm(per):
    return math.sqrt(sum(v * v for v in per.values()))


def train(rec, model, opt, steps, *, micro=1, between=None, start=0):
    """Plain steps; ``between(step, model)`` runs after the last backward, before the step.
    Returns the true as-accumulated per-parameter norms of each step (float64, independent)."""
    true = []
    for step in range(start, start + steps):
        for mb in range(micro):
            x, y = batch(10 * step + mb)
            (nn.functional.mse_loss(model(x), y) / micro).backward()
        true.append(norms(model))
        if between is not None:
            between(step, model)
        opt.step()
        opt.zero_grad()
    return true


def assert_accumulated(run, steps, true, micro=1):
    for step, want in zip(steps, true, strict=True):
        info, figures = run.step_info(step), run.figures(step)
        assert info["grad_norm_accumulated"] == pytest.approx(global_norm(want), rel=1e-12)
        assert info["micro_batches"] == micro
        for name, value in want.items():
            assert figures[name]["grad_norm_accumulated"] == pytest.approx(value, rel=1e-12)


def test_an_untouched_loop_is_trusted_after_the_proof_and_keeps_exact_figures(tmp_path):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gx.watch(model, opt, tmp_path / "run", bins=8) as rec:
        true = train(rec, model, opt, A.PROOF_STEPS - 1)
        assert not rec.probe.trusted and rec.probe.hooks == "all"  # still proving
        true += train(rec, model, opt, 1, start=A.PROOF_STEPS - 1)
        assert rec.probe.trusted  # proven: one hook left, on the last layer's bias
        assert rec.probe.hooks == "anchor" and rec.probe.anchor is model[2].bias
        true += train(rec, model, opt, 6, micro=1, start=A.PROOF_STEPS)
        assert rec.probe.trusted and rec.ledger.clip_coef == 1.0 and rec.ledger.clipped is False
        true_micro = train(rec, model, opt, 3, micro=4, start=20)  # accumulation, still counted
        assert rec.probe.trusted and rec.probe.hooks == "anchor"
    run = gx.open_run(tmp_path / "run")
    n = A.PROOF_STEPS + 6
    assert_accumulated(run, run.steps[:n], true)
    assert_accumulated(run, run.steps[n:], true_micro, micro=4)


def test_clipping_that_starts_after_the_proof_loses_one_step_then_is_measured_again(tmp_path):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    clip_from = A.PROOF_STEPS + 2

    def clip(step, m):
        if step >= clip_from:
            nn.utils.clip_grad_norm_(m.parameters(), 0.1)

    with pytest.warns(MonitorWarning) as told, gx.watch(model, opt, tmp_path / "run", bins=8) as rec:
        true = train(rec, model, opt, clip_from + 4, between=clip)
        assert not rec.probe.trusted and rec.probe.hooks == "all"
    said = [str(w.message) for w in told if "not known" in str(w.message)]
    assert len(said) == 1 and ".grad was written between the last backward" in said[0]
    run = gx.open_run(tmp_path / "run")
    lost = clip_from + 1  # run steps count from 1
    info = run.step_info(lost)
    assert info["grad_norm_accumulated"] is None and info["clip_coef"] is None  # said, not wrong
    assert info["grad_norm_applied"] == pytest.approx(0.1, rel=1e-5)
    before = [s for s in run.steps if s < lost]
    after = [s for s in run.steps if s > lost]
    assert_accumulated(run, before, true[:lost - 1])
    assert_accumulated(run, after, true[lost:])  # the true pre-clip norms again
    assert all(run.step_info(s)["clipped"] for s in after)


def test_a_write_that_bypasses_the_version_counter_keeps_the_probe_measuring(tmp_path):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def clamp(step, m):  # the old RL idiom: autograd does not see .data writes
        for p in m.parameters():
            p.grad.data.clamp_(-1, 1)

    with gx.watch(model, opt, tmp_path / "run", bins=8) as rec:
        true = train(rec, model, opt, A.PROOF_STEPS + 3, between=clamp)
        assert not rec.probe.trusted
    run = gx.open_run(tmp_path / "run")
    assert_accumulated(run, run.steps, true)
    assert all(run.step_info(s)["clip_coef"] < 1 for s in run.steps)


def test_a_check_step_catches_a_hidden_write_that_begins_while_trusted(tmp_path, monkeypatch):
    monkeypatch.setattr(A, "VERIFY_EVERY", 4)
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    hidden_from = A.PROOF_STEPS + 1

    def clamp(step, m):
        if step >= hidden_from:
            for p in m.parameters():
                p.grad.data.mul_(0.5)

    with gx.watch(model, opt, tmp_path / "run", bins=8) as rec:
        train(rec, model, opt, hidden_from, between=clamp)
        assert rec.probe.trusted
        seen = []
        for k in range(A.VERIFY_EVERY + 1):
            train(rec, model, opt, 1, between=clamp, start=hidden_from + k)
            seen.append(rec.probe.trusted)
        assert seen[-1] is False and rec.probe.hooks == "all"  # the check step found it


def test_a_backward_outside_the_models_output_keeps_the_parameter_hooks(tmp_path):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    true = []
    with gx.watch(model, opt, tmp_path / "run", bins=8) as rec:
        for step in range(A.PROOF_STEPS + 3):
            x, y = batch(step)
            nn.functional.mse_loss(model(x), y).backward()
            # a regulariser's own backward, not through the model's output: counted, and the
            # per-parameter hooks that see it stay on although the loop is trusted
            (1e-3 * sum(p.square().sum() for p in model.parameters())).backward()
            true.append(norms(model))
            opt.step()
            opt.zero_grad()
        assert rec.probe.trusted and rec.probe.hooks == "all"
    run = gx.open_run(tmp_path / "run")
    assert_accumulated(run, run.steps, true, micro=2)


def test_a_backward_that_misses_the_anchor_is_said_lost_and_every_hook_comes_back(tmp_path):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with pytest.warns(MonitorWarning, match="no backward reached the parameter watched"), \
            gx.watch(model, opt, tmp_path / "run", bins=8) as rec:
        train(rec, model, opt, A.PROOF_STEPS + 1)
        assert rec.probe.hooks == "anchor"
        x, _ = batch(99)
        model[0](x).square().mean().backward()  # the first layer only: not the anchor
        nn.utils.clip_grad_norm_(model.parameters(), 1e-3)
        opt.step()
        opt.zero_grad()
        assert rec.probe.hooks == "all" and not rec.probe.trusted
        lost = rec.ledger
        true = train(rec, model, opt, 2, start=50)
    assert lost.grad_norm_accumulated is None and lost.clip_coef is None  # unknown, not wrong
    run = gx.open_run(tmp_path / "run")
    assert_accumulated(run, run.steps[-2:], true)


def test_reentrant_checkpoints_keep_the_anchor_in_the_outer_backward(tmp_path):
    from torch.utils.checkpoint import checkpoint

    class Checkpointed(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.body = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 8))
            self.head = nn.Linear(8, 3)

        def forward(self, x):
            return self.head(checkpoint(self.body, x, use_reentrant=True))

    model = Checkpointed()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gx.watch(model, opt, tmp_path / "run", bins=8) as rec:
        true = []
        for step in range(A.PROOF_STEPS + 4):
            x, y = batch(step)
            nn.functional.mse_loss(model(x.requires_grad_()), y).backward()
            true.append(norms(model))
            opt.step()
            opt.zero_grad()
        assert rec.probe.trusted and rec.probe.anchor is model.head.bias
    run = gx.open_run(tmp_path / "run")
    assert_accumulated(run, run.steps, true)


def test_a_gradient_replaced_after_the_proof_is_never_taken_for_the_accumulated_one(tmp_path):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    swap_from = A.PROOF_STEPS + 2

    def swap(step, m):  # a new tensor in .grad, its version count made equal to the old one's:
        if step >= swap_from:  # only the tensors' identity tells them apart
            for p in m.parameters():
                new = p.grad * 0.5
                for _ in range(p.grad._version - new._version):
                    new.add_(0)
                assert new._version == p.grad._version
                p.grad = new

    with pytest.warns(MonitorWarning) as told, gx.watch(model, opt, tmp_path / "run", bins=8) as rec:
        true = train(rec, model, opt, swap_from + 3, between=swap)
        assert not rec.probe.trusted
    said = [str(w.message) for w in told if "not known" in str(w.message)]
    assert len(said) == 1 and ".grad was written between the last backward" in said[0]
    run = gx.open_run(tmp_path / "run")
    lost = swap_from + 1  # run steps count from 1
    assert run.step_info(lost)["grad_norm_accumulated"] is None  # not the halved applied norm
    assert_accumulated(run, [s for s in run.steps if s < lost], true[:lost - 1])
    after = [s for s in run.steps if s > lost]
    assert_accumulated(run, after, true[lost:])
    assert all(run.step_info(s)["clip_coef"] == pytest.approx(0.5) for s in after)


def test_a_backward_that_raised_never_leaves_the_applied_gradient_as_the_accumulated_one(tmp_path):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    failing = {"now": False}

    def fail(grad):  # a backward that raises half-way; the loop catches it and retries
        if failing["now"]:
            raise FloatingPointError("bad batch")
        return grad

    model[0].weight.register_hook(fail)
    raise_at = 2
    true = []
    with pytest.warns(MonitorWarning, match="a backward raised before its end"), \
            gx.watch(model, opt, tmp_path / "run", bins=8):
        for step in range(raise_at + 3):
            x, y = batch(step)
            if step == raise_at:
                failing["now"] = True
                with pytest.raises(FloatingPointError):
                    nn.functional.mse_loss(model(x), y).backward()
                failing["now"] = False
                opt.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            true.append(norms(model))
            nn.utils.clip_grad_norm_(model.parameters(), 0.1)
            opt.step()
            opt.zero_grad()
    run = gx.open_run(tmp_path / "run")
    lost = raise_at + 1  # run steps count from 1
    assert run.step_info(lost)["grad_norm_accumulated"] is None  # not the clipped 0.1
    assert_accumulated(run, [s for s in run.steps if s < lost], true[:lost - 1])
    assert_accumulated(run, [s for s in run.steps if s > lost], true[lost:])  # seen again
