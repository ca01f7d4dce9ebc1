"""The noise scale's capture reads a large gradient in its hook, while it is in the cache
(``core/steps/micro_batches.py``'s ``_Reader``), and holds the others for the step's pass: the
figures equal float64 ones from each micro-batch's own gradient either way, a backward that the
step does not count leaves nothing in its sums, and a read that fails never breaks the backward."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
import torch
from test_noise_scale import B, K, Net, check_step, data, reference, train, train_step
from torch import nn

import gradexplorer as gx
from gradexplorer.core.steps import micro_batches as MB


def watched(model, **kwargs):
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    return opt, gx.watch(model, opt, update_ratio=False, noise_every=1, **kwargs)


@pytest.mark.parametrize("read_min", [1, 40], ids=["every gradient in its hook", "the large ones"])
def test_gradients_read_in_their_hooks_give_the_float64_figures(monkeypatch, read_min):
    """Net's parameters hold 40, 8, 8, 8, 24 and 3 values: with READ_MIN 40 fc1.weight is read
    in its hook and the rest held; with 1 every one is read in its hook and none held."""
    monkeypatch.setattr(MB, "READ_MIN", read_min)
    torch.manual_seed(3)
    model = Net()
    opt, rec = watched(model)
    capture = rec.noise.capture
    readers = {n for (n, p), hook in zip(model.named_parameters(), capture._hooks, strict=True)
               if isinstance(hook, MB._Reader)}
    assert readers == ({n for n, _ in model.named_parameters()} if read_min == 1 else {"fc1.weight"})
    held_at_pass = []
    orig = MB.MicroBatchNorms._read

    def read(self):  # the step's pass: what is held for it
        if self is capture:
            held_at_pass.append({n for (n, _), held in zip(model.named_parameters(), self._held,
                                                            strict=True) if held})
        orig(self)
    monkeypatch.setattr(MB.MicroBatchNorms, "_read", read)
    seen, refs = [], []
    for step in range(3):
        refs.append(reference(model, *data(step), K, B))
        train_step(model, opt, step)
        seen.append(rec.noise.latest)
        assert rec.noise.latest.step == step + 1
    rec.close()
    assert capture.used == "numba"
    names = {n for n, _ in model.named_parameters()}
    assert held_at_pass and all(h == names - readers for h in held_at_pass)
    for noise, ref in zip(seen, refs, strict=True):
        check_step(noise, ref)
    assert not any(p._backward_hooks for p in model.parameters())


class TransposedGrad(torch.autograd.Function):
    """``x @ w``, whose backward hands ``w`` a non-contiguous gradient (a strided view, whose
    storage holds other values between its own)."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        wide = grad.new_zeros(w.shape[0], 2 * w.shape[1])
        wide[:, ::2] = x.t() @ grad  # every other column of a wider tensor: a strided view
        return grad @ w.t(), wide[:, ::2]


class Odd(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(5, 3) * 0.3)
        self.fc = nn.Linear(5, 5)

    def forward(self, x):
        return TransposedGrad.apply(torch.tanh(self.fc(x)), self.w)


def test_a_gradient_the_hook_cannot_read_in_place_is_held_and_still_exact(monkeypatch):
    monkeypatch.setattr(MB, "READ_MIN", 1)
    torch.manual_seed(4)
    model = Odd()
    opt, rec = watched(model)
    seen = []
    orig = MB._Reader.__call__

    def spy(self, grad):
        seen.append(grad.is_contiguous())
        return orig(self, grad)
    monkeypatch.setattr(MB._Reader, "__call__", spy)
    x, y = data(0)
    twin = copy.deepcopy(model).double()
    grads = [torch.autograd.grad(nn.functional.mse_loss(twin(x[i * B:(i + 1) * B].double()),
                                                         y[i * B:(i + 1) * B].double()),
                                 list(twin.parameters())) for i in range(K)]
    train_step(model, opt, 0)
    rec.close()
    assert False in seen and True in seen  # w's gradient is a strided view: held
    small = sum(float(g.pow(2).sum()) for per in grads for g in per) / K
    got = rec.noise.latest
    assert got is not None and got.whole.small == pytest.approx(small, rel=2e-6)
    assert rec.noise.latest.whole.big == pytest.approx(
        sum(float(sum(per[j] for per in grads).div(K).pow(2).sum()) for j in range(3)), rel=2e-6)


def test_sums_a_backward_outside_the_step_read_in_the_hooks_are_dropped(monkeypatch):
    """A backward the step does not count (the app's gradient trace between steps; a step not
    recorded) is dropped at its end (``backward(False)``), whatever its hooks read, and a read
    of its that failed with it."""
    monkeypatch.setattr(MB, "READ_MIN", 1)
    kernel = MB._kernel()
    calls = []

    def failing_once(*args):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("one bad read")
        return kernel[0](*args)
    monkeypatch.setattr(MB, "_KERNEL", (failing_once, kernel[1]))
    torch.manual_seed(5)
    model = Net()
    twin = copy.deepcopy(model).double()  # each micro-batch's own gradient, without the hooks
    params = list(model.parameters())
    capture = MB.MicroBatchNorms(params)
    try:
        x, y = data(1)
        nn.functional.mse_loss(model(x * 3), y).backward()  # outside the step
        assert capture._hot and capture._why and "one bad read" in capture._why
        capture.backward(False)
        assert not capture._hot and not capture._now.any() and capture._why is None
        model.zero_grad()
        own = []
        for i in range(K):
            part = slice(i * B, (i + 1) * B)
            own.append(torch.autograd.grad(nn.functional.mse_loss(twin(x[part].double()),
                                                                  y[part].double()),
                                           list(twin.parameters())))
            nn.functional.mse_loss(model(x[part]), y[part]).backward()
            capture.backward(True)
        sums = capture.take()
    finally:
        capture.remove()
    want = [sum(float(g[j].pow(2).sum()) for g in own) for j in range(len(params))]
    assert sums.parts == K and sums.why is None
    np.testing.assert_allclose(sums.diff_sq, want, rtol=1e-6)


def test_a_read_that_fails_is_said_once_and_the_backward_goes_on(monkeypatch):
    monkeypatch.setattr(MB, "READ_MIN", 1)

    def broken(*_args):
        raise RuntimeError("kernel fell over")
    monkeypatch.setattr(MB, "_KERNEL", (broken, None))
    torch.manual_seed(6)
    model = Net()
    lines = []
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    rec = gx.Recorder(model, opt, None, update_ratio=False, noise_every=1, report=lines.append)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing raised into the loop, nothing warned twice
        train(model, opt, 3)
    rec.close()
    assert rec.step_count == 3 and rec.noise.latest is None
    said = [line for line in lines if "kernel fell over" in line]
    assert len(said) == 1 and "the capture failed" in said[0] and "said once" in said[0]
    assert all(torch.isfinite(p).all() for p in model.parameters())
