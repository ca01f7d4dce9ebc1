"""The gradient noise scale and per-parameter SNR of accumulating steps (docs/noise.md) equal a
float64 computation from each micro-batch's own gradient, taken independently here with
``torch.autograd.grad`` per micro-batch on a float64 copy of the model."""

import copy
import math

import numpy as np
import pytest
import torch
from legacy_runs import fixture_copy
from torch import nn

import gradexplorer as gx
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.runs.noise_rows import module_noise, noise_params, noise_rows, snr_curve
from gradexplorer.core.runs.run import Run
from gradexplorer.core.steps import micro_batches as MB
from gradexplorer.core.watch.noise_watch import NoiseSettings

K, B = 4, 6


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.norm, self.fc2 = nn.Linear(5, 8), nn.LayerNorm(8), nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(torch.tanh(self.norm(self.fc1(x))))


def data(step, k=K, b=B):
    g = torch.Generator().manual_seed(step)
    return torch.randn(k * b, 5, generator=g), torch.randn(k * b, 3, generator=g)


def reference(model, x, y, k, b):
    """Per parameter (float64): mean_i |g_i|², |mean_i g_i|² and the micro-batch gradients."""
    twin = copy.deepcopy(model).double()
    names, params = zip(*twin.named_parameters(), strict=True)
    grads = [torch.autograd.grad(nn.functional.mse_loss(twin(x[i * b:(i + 1) * b].double()),
                                                         y[i * b:(i + 1) * b].double()), params)
             for i in range(k)]
    per = {}
    for j, name in enumerate(names):
        g = torch.stack([grads[i][j] for i in range(k)])
        per[name] = (float(g.pow(2).flatten(1).sum(1).mean()), float(g.mean(0).pow(2).sum()), g)
    return per


def train_step(model, opt, step, k=K, b=B, divisor=None):
    """Step ``step`` of ``k`` micro-batches of ``b`` (``data(step)``), each loss ÷ ``divisor``
    (``k`` by default)."""
    x, y = data(step, k, b)
    for i in range(k):
        loss = nn.functional.mse_loss(model(x[i * b:(i + 1) * b]), y[i * b:(i + 1) * b])
        (loss / (k if divisor is None else divisor)).backward()
    opt.step()
    opt.zero_grad()


def train(model, opt, steps, k=K, b=B, divisor=None, refs=None):
    for step in range(steps):
        if refs is not None:
            refs.append(reference(model, *data(step, k, b), k, b))
        train_step(model, opt, step, k, b, divisor)


def expected(small, big, k, b):
    g_sq = (k * b * big - b * small) / (k * b - b)
    trace = (small - big) / (1 / b - 1 / (k * b))
    return g_sq, trace


def check_step(noise, ref, k=K, b=B, rel=2e-5):
    per = dict(zip(noise.names, zip(*(noise.per[c] for c in ("small", "big", "g_sq", "trace",
                                                             "snr")), strict=True), strict=True))
    assert set(per) == set(ref)
    for name, (small, big, g) in ref.items():
        g_sq, trace = expected(small, big, k, b)
        got = per[name]
        assert got[0] == pytest.approx(small, rel=rel) and got[1] == pytest.approx(big, rel=rel)
        assert got[2] == pytest.approx(g_sq, rel=rel, abs=1e-9) and got[3] == pytest.approx(trace, rel=rel)
        # the SNR's definition read off the micro-batch gradients themselves: the squared true
        # gradient's estimate over the unbiased variance Σ_i |g_i − ḡ|² / (k − 1)
        variance = float((g - g.mean(0)).pow(2).sum()) / (k - 1)
        assert got[4] == pytest.approx((float(g.mean(0).pow(2).sum()) - variance / k) / variance,
                                       rel=1e-4, abs=1e-9)
    small = math.fsum(s for s, _, _ in ref.values())
    big = math.fsum(v for _, v, _ in ref.values())
    g_sq, trace = expected(small, big, k, b)
    assert noise.whole.trace == pytest.approx(trace, rel=rel)
    assert noise.whole.g_sq == pytest.approx(g_sq, rel=1e-4)
    assert noise.whole.b_simple == pytest.approx(trace / g_sq, rel=1e-4)


@pytest.mark.parametrize("path", ["numba", "torch"])
def test_noise_scale_equals_float64_from_each_micro_batch(tmp_path, monkeypatch, path):
    if path == "torch":  # the path of devices, and of the CPU before the kernels are compiled
        monkeypatch.setattr(MB, "_kernel", lambda: None)
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    seen, refs = [], []
    with gx.watch(model, opt, tmp_path / "run", update_ratio=False, noise_every=1) as rec:
        orig = rec.noise.take

        def take(*args):
            seen.append(orig(*args))
            return seen[-1]
        rec.noise.take = take
        train(model, opt, 3, refs=refs)
        assert rec.noise.capture.used == path
    assert len(seen) == 3
    for noise, ref in zip(seen, refs, strict=True):
        assert noise.parts == K and noise.batch == B
        check_step(noise, ref)
    with Run(tmp_path / "run") as run:  # the same figures in the run directory
        rows = noise_rows(run)
        assert [r["step"] for r in rows] == [1, 2, 3]
        assert rows[-1]["b_simple"] == pytest.approx(seen[-1].whole.b_simple, rel=1e-12)
        stored = noise_params(run, 3)
        for i, name in enumerate(seen[-1].names):
            assert stored[name]["snr"] == pytest.approx(seen[-1].per["snr"][i], rel=1e-12)
        # the module rollup: fc1's own figures, and the whole model's equal the step's
        modules = module_noise(stored, K, B)
        assert modules[""].b_simple == pytest.approx(rows[-1]["b_simple"], rel=1e-9)
        small = stored["fc1.weight"]["g_small_sq"] + stored["fc1.bias"]["g_small_sq"]
        big = stored["fc1.weight"]["g_big_sq"] + stored["fc1.bias"]["g_big_sq"]
        assert modules["fc1"].trace == pytest.approx(expected(small, big, K, B)[1], rel=1e-12)
        steps, snr, _ = snr_curve(run, "fc2.weight")
        assert steps == [1, 2, 3] and snr[-1] == stored["fc2.weight"]["snr"]


def test_summed_losses_need_the_divisor_only_for_the_absolute_figures(tmp_path):
    torch.manual_seed(1)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.0)  # the same weights every step
    got = {}
    for divisor, settings in (("sum", NoiseSettings(loss_divisor=1)), ("wrong", True)):
        refs = []
        with gx.watch(model, opt, noise_scale=settings, update_ratio=False, noise_every=1) as rec:
            train(model, opt, 1, divisor=1, refs=refs)  # losses summed over the micro-batches
            got[divisor] = rec.noise.latest
    check_step(got["sum"], refs[0])
    # told "k" for a summed loss: the squares come out k² too large, their ratios exact
    assert got["wrong"].whole.trace == pytest.approx(got["sum"].whole.trace * K ** 2, rel=1e-12)
    assert got["wrong"].whole.b_simple == pytest.approx(got["sum"].whole.b_simple, rel=1e-12)


def test_smoothed_b_simple_is_the_ratio_of_the_two_emas_with_a_delta_method_band():
    torch.manual_seed(2)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    beta, steps = 0.8, 6
    out, refs = [], []
    with gx.watch(model, opt, noise_scale=NoiseSettings(beta=beta), update_ratio=False,
                  noise_every=1) as rec:
        for step in range(steps):
            x, y = data(step)
            refs.append(reference(model, x, y + 2, K, B))
            for i in range(K):  # targets offset by 2: a gradient the noise does not hide
                (nn.functional.mse_loss(model(x[i * B:(i + 1) * B]), y[i * B:(i + 1) * B] + 2) / K
                 ).backward()
            opt.step()
            opt.zero_grad()
            out.append(rec.noise.latest)
    t = np.array([n.whole.trace for n in out])
    g = np.array([n.whole.g_sq for n in out])
    w = (1 - beta) * beta ** np.arange(steps - 1, -1, -1)
    w = w / w.sum()  # the bias-corrected EMA: normalised weights
    T, G = w @ t, w @ g
    last = out[-1].smoothed
    assert last.trace == pytest.approx(T, rel=1e-12) and last.g_sq == pytest.approx(G, rel=1e-12)
    assert last.b_simple == pytest.approx(T / G, rel=1e-12)
    rel = w @ (t - T) ** 2 / T ** 2 + w @ (g - G) ** 2 / G ** 2 - 2 * (w @ ((t - T) * (g - G))) / (T * G)
    se = abs(T / G) * math.sqrt(max(rel, 0) * (w ** 2).sum())
    assert last.low == pytest.approx(T / G - se, rel=1e-9)
    assert last.high == pytest.approx(T / G + se, rel=1e-9)
    # each parameter's smoothed SNR: b · EMA(|G|²_est) / EMA(tr(Σ)_est) of the float64 figures
    for j, name in enumerate(out[-1].names):
        per = np.array([expected(*ref[name][:2], K, B) for ref in refs])  # (steps, 2)
        ema = np.zeros(2)
        for row in per:
            ema = beta * ema + (1 - beta) * row
        assert out[-1].per["snr_ema"][j] == pytest.approx(B * ema[0] / ema[1], rel=1e-4)


def test_one_backward_a_step_has_no_noise_scale_and_keeps_no_copy(tmp_path):
    torch.manual_seed(3)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    lines = []
    with gx.watch(model, opt, tmp_path / "run", update_ratio=False, noise_every=1) as rec:
        rec.noise._report = lines.append
        train(model, opt, MB.SINGLE_STEPS + 1, k=1, b=24)
        assert rec.noise.latest is None and not rec.noise.capture.keep
        train(model, opt, 2)  # accumulation begins: figures from the step after it is seen
        assert rec.noise.capture.keep and rec.noise.latest is not None
    first = MB.SINGLE_STEPS + 2  # the first step of several backwards found no copy kept
    assert lines == [f"gradexplorer: no noise scale at step {first}: the loop had one backward a "
                     "step until now (said once)"]
    with Run(tmp_path / "run") as run:
        assert [r["step"] for r in noise_rows(run)] == [first + 1]
        assert noise_params(run, first) == {} and set(noise_params(run, first + 1)) == {
            n for n, _ in model.named_parameters()}


def test_unequal_micro_batches_are_said_once_and_not_estimated():
    torch.manual_seed(4)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    lines = []
    rec = gx.watch(model, opt, update_ratio=False, noise_every=1)
    rec.noise._report = lines.append
    for _ in range(2):
        x, y = data(0)
        for sl in (slice(0, 10), slice(10, 24)):
            (nn.functional.mse_loss(model(x[sl]), y[sl]) / 2).backward()
        opt.step()
        opt.zero_grad()
    rec.close()
    assert rec.noise.latest is None
    assert len(lines) == 1 and "micro-batch sizes ['10', '14'] are not one size" in lines[0]


def test_bad_settings_are_one_line_errors():
    with pytest.raises(UserError, match="micro_batch_size"):
        NoiseSettings(micro_batch_size=0)
    with pytest.raises(UserError, match="loss_divisor"):
        NoiseSettings(loss_divisor="mean")
    with pytest.raises(UserError, match="noise_scale must be"):
        gx.watch(Net(), noise_scale="yes")


def test_inspect_shows_the_noise_scale_and_old_runs_still_open(tmp_path, run_cli):
    torch.manual_seed(5)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with gx.watch(model, opt, tmp_path / "run", update_ratio=False, noise_every=1):
        train(model, opt, 3)
    code, out, _ = run_cli("inspect", tmp_path / "run")
    assert code == 0
    assert f"noise scale: {K} micro-batches of {B}: B_simple" in out and "SNR" in out
    old = fixture_copy(tmp_path / "old")  # a version-2 run, from before the noise tables
    with Run(old) as run:
        assert noise_rows(run) == [] and noise_params(run, run.last_step) == {}
        assert snr_curve(run, run.parameters[0]) == ([], [], [])
    code, out, _ = run_cli("inspect", old)
    assert code == 0 and "noise scale" not in out and "SNR" not in out


def test_the_report_draws_the_noise_scale_and_says_when_a_run_has_none(tmp_path):
    from gradexplorer.core.messages.number_text import format_number
    from gradexplorer.core.share.report_html import write_report

    torch.manual_seed(6)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with gx.watch(model, opt, tmp_path / "run", update_ratio=False, noise_every=1):
        train(model, opt, 4)
    with Run(tmp_path / "run") as run:
        write_report(run, tmp_path / "r.html")
        last = noise_rows(run)[-1]
        lowest = min(noise_params(run, 4).items(), key=lambda kv: kv[1]["snr"])
    page = (tmp_path / "r.html").read_text()
    section = page[page.index('<section id="noise">'):]
    section = section[:section.index("</section>")]
    assert f"4 steps of {K} micro-batches of {B}" in section
    assert f"B_simple {format_number(last['b_simple_ema'], 4)} smoothed" in section
    assert section.index(lowest[0]) < section.index("</table>")  # the noisiest parameter listed
    with Run(fixture_copy(tmp_path / "old")) as old:
        write_report(old, tmp_path / "old.html")
    assert "No step of several backwards" in (tmp_path / "old.html").read_text()


def test_a_grad_scalers_scale_is_divided_out(tmp_path):
    torch.manual_seed(7)
    base = Net()
    got = {}
    for scaled in (False, True):
        model = copy.deepcopy(base)
        opt = torch.optim.SGD(model.parameters(), lr=0.0)
        scaler = torch.amp.GradScaler("cpu", init_scale=1024.0) if scaled else None
        refs = []
        with gx.watch(model, opt, scaler=scaler, update_ratio=False, noise_every=1) as rec:
            x, y = data(0)
            refs.append(reference(model, x, y, K, B))
            for i in range(K):
                loss = nn.functional.mse_loss(model(x[i * B:(i + 1) * B]), y[i * B:(i + 1) * B]) / K
                (scaler.scale(loss) if scaled else loss).backward()
            if scaled:
                scaler.step(opt)
                scaler.update()
            else:
                opt.step()
            got[scaled] = rec.noise.latest
        check_step(got[scaled], refs[0])
    assert got[True].whole.trace == pytest.approx(got[False].whole.trace, rel=1e-6)


def test_a_step_with_inf_is_left_out_and_the_smoothing_goes_on():
    torch.manual_seed(8)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", init_scale=64.0)  # skips the step that holds Inf
    lines, out = [], []
    with gx.watch(model, opt, scaler=scaler, update_ratio=False, noise_every=1) as rec:
        rec.noise._report = lines.append
        for step in range(3):
            x, y = data(step)
            if step == 1:
                y[0, 0] = math.inf  # one micro-batch's loss, and the step's gradient, not finite
            for i in range(K):
                loss = nn.functional.mse_loss(model(x[i * B:(i + 1) * B]), y[i * B:(i + 1) * B] + 2)
                scaler.scale(loss / K).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
            out.append(rec.noise.latest)
    assert out[1] is None and out[0] is not None and out[2] is not None
    assert lines == ["gradexplorer: no noise scale at step 2: its gradient holds NaN or Inf (said once)"]
    assert math.isfinite(out[2].smoothed.b_simple) and rec.noise.smoother.steps == 2


class Tied(nn.Module):
    """fc used twice (shared weights) and a branch only micro-batches of even index reach."""

    def __init__(self):
        super().__init__()
        self.fc, self.side, self.out = nn.Linear(5, 5), nn.Linear(5, 3), nn.Linear(5, 3)
        self.use_side = True

    def forward(self, x):
        h = torch.tanh(self.fc(torch.tanh(self.fc(x))))
        return self.out(h) + (self.side(x) if self.use_side else 0)


def tied_reference(model, x, y, k, b):
    """``reference`` for Tied: micro-batch i reaches side only when i is even (else its
    gradient is 0)."""
    twin = copy.deepcopy(model).double()
    names, params = zip(*twin.named_parameters(), strict=True)
    grads = []
    for i in range(k):
        twin.use_side = i % 2 == 0
        loss = nn.functional.mse_loss(twin(x[i * b:(i + 1) * b].double()), y[i * b:(i + 1) * b].double())
        got = torch.autograd.grad(loss, params, allow_unused=True)
        grads.append([torch.zeros_like(p) if g is None else g for g, p in zip(got, params, strict=True)])
    per = {}
    for j, name in enumerate(names):
        g = torch.stack([grads[i][j] for i in range(k)])
        per[name] = (float(g.pow(2).flatten(1).sum(1).mean()), float(g.mean(0).pow(2).sum()), g)
    return per


@pytest.mark.parametrize("hold", ["step", "each backward"])
@pytest.mark.parametrize("zero", ["zero_grad", "in place"])
def test_shared_weights_unused_parameters_and_either_zero_grad(monkeypatch, hold, zero):
    """The gradients held for the step's one pass (or read at each backward's end, for a model
    over HOLD_BYTES) give the float64 figures with a weight used twice in a forward, parameters
    some backwards do not reach, and .grad set to None or zeroed in place between steps; closed,
    no hook stays on the model's tensors."""
    if hold == "each backward":  # a model over HOLD_BYTES: read at each backward's end
        monkeypatch.setattr(MB, "HOLD_BYTES", 1)
    torch.manual_seed(9)
    model = Tied()
    opt = torch.optim.SGD(model.parameters(), lr=0.05 if zero == "zero_grad" else 0.0)
    seen, refs = [], []
    rec = gx.watch(model, opt, update_ratio=False, noise_every=1)
    assert rec.noise.capture.hold == (1 if hold == "each backward" else MB.HOLD_BYTES // (4 * 66))
    hooked = [p for p in model.parameters() if p._backward_hooks]
    assert len(hooked) == 6  # one hook a parameter tensor, the shared one once
    for step in range(3):
        x, y = data(step)
        refs.append(tied_reference(model, x, y, K, B))
        for i in range(K):
            model.use_side = i % 2 == 0  # side's parameters unused in backwards 1 and 3
            loss = nn.functional.mse_loss(model(x[i * B:(i + 1) * B]), y[i * B:(i + 1) * B])
            (loss / K).backward()
        opt.step()
        if zero == "zero_grad":
            opt.zero_grad()
        else:
            opt.zero_grad(set_to_none=False)
        seen.append(rec.noise.latest)
    rec.close()
    for noise, ref in zip(seen, refs, strict=True):
        check_step(noise, ref)
    # closed: no hook left on the model's tensors, no gradient held
    assert not any(p._backward_hooks for p in model.parameters())
    assert not any(rec.noise.capture._held)

