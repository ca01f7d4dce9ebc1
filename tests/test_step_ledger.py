"""The two measuring points and the step ledger in plain loops: clipping, accumulation,
closures, a GradScaler's skipped steps, the optimizer's state, old runs, inspect."""

import math
import sqlite3
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
from torch import nn

import gradexplorer as gx
from tests.legacy_runs import legacy_run
from tests.stats_reference import reference_state


def make_model(zero_bias=False):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    if zero_bias:
        nn.init.zeros_(model[2].bias)
    return model


def batch(i, scale=1.0):
    g = torch.Generator().manual_seed(i)
    return torch.randn(16, 6, generator=g) * scale, torch.randn(16, 3, generator=g) * 40


def global_norm(grads):
    return math.sqrt(sum(float(g.double().square().sum()) for g in grads))


def test_clipped_accumulating_loop_records_the_pre_clip_and_the_applied_gradient(tmp_path):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    names = [n for n, _ in model.named_parameters()]
    pre, post, losses = [], [], []
    with gx.watch(model, opt, tmp_path / "run", bins=8) as rec:
        for step in range(4):
            step_losses = []
            for mb in range(3):
                x, y = batch(10 * step + mb)
                loss = nn.functional.mse_loss(model(x), y)
                (loss / 3).backward()
                rec.note_loss(loss)
                step_losses.append(loss.item())
            losses.append(float(np.mean(step_losses)))
            pre.append({n: p.grad.double().clone() for n, p in model.named_parameters()})
            nn.utils.clip_grad_norm_(model.parameters(), 0.1)
            post.append({n: p.grad.double().clone() for n, p in model.named_parameters()})
            opt.step()
            opt.zero_grad()
        assert rec.ledger.optimizer_step == 4 and rec.ledger.clipped
    run = gx.open_run(tmp_path / "run")
    assert run.steps == [1, 2, 3, 4]
    for step in run.steps:
        info, stats = run.step_info(step), run.figures(step)
        true = global_norm(pre[step - 1].values())
        assert true > 10  # the clip really bites
        assert info["grad_norm_accumulated"] == pytest.approx(true, rel=1e-12)
        assert info["grad_norm_applied"] == pytest.approx(global_norm(post[step - 1].values()),
                                                          rel=1e-12)
        assert info["grad_norm_applied"] == pytest.approx(0.1, rel=1e-5)
        assert info["global_norm"] == info["grad_norm_applied"]
        assert info["clip_coef"] == pytest.approx(info["grad_norm_applied"] / true, rel=1e-12)
        assert info["clipped"] is True and info["skipped"] is False and info["scale"] is None
        assert (info["optimizer_step"], info["iteration"], info["micro_batches"]) == \
            (step, 3 * step, 3)
        assert info["loss"] == pytest.approx(losses[step - 1], rel=1e-12)
        assert info["lr"] == [0.01]
        for n in names:
            assert stats[n]["grad_norm_accumulated"] == pytest.approx(
                float(pre[step - 1][n].norm()), rel=1e-12)
            assert stats[n]["norm"] == pytest.approx(float(post[step - 1][n].norm()), rel=1e-12)


def test_unclipped_steps_have_coefficient_one_and_every_skips_unrecorded_steps(tmp_path):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gx.watch(model, opt, tmp_path / "run", stats_every=2) as rec:
        for step in range(4):
            for mb in range(2):
                x, y = batch(step * 2 + mb, 0.1)
                nn.functional.mse_loss(model(x), y).backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1e9)
            opt.step()
            opt.zero_grad()
        assert rec.probe.backwards == 8
    run = gx.open_run(tmp_path / "run")
    assert run.steps == [2, 4]
    for step in run.steps:
        led = run.step_ledger(step)
        assert led.clip_coef == pytest.approx(1.0, rel=1e-12) and led.clipped is False
        assert (led.iteration, led.micro_batches, led.loss) == (2 * step, 2, None)


@pytest.mark.parametrize("make_opt", [lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.5),
                                      lambda p: torch.optim.LBFGS(p, lr=0.5, max_iter=4)])
def test_step_with_closure_records_its_own_last_evaluation(tmp_path, make_opt):
    model = make_model()
    opt = make_opt(model.parameters())
    x, y = batch(0, 0.3)
    seen = []

    def closure():
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        seen.append((loss.item(), {n: p.grad.double().clone() for n, p in model.named_parameters()}))
        return loss

    last = []
    with gx.watch(model, opt, tmp_path / "run") as rec:
        for _ in range(3):
            seen.clear()
            opt.step(closure)
            last.append(seen[-1])
            assert rec.latest().step == len(last)
    run = gx.open_run(tmp_path / "run")
    assert run.steps == [1, 2, 3]
    for step, (loss, grads) in zip(run.steps, last, strict=True):
        stats = run.figures(step)
        for name, g in grads.items():
            assert stats[name]["norm"] == pytest.approx(float(g.norm()), rel=1e-12)
            assert stats[name]["grad_norm_accumulated"] == pytest.approx(float(g.norm()), rel=1e-12)
        assert run.step_info(step)["loss"] == pytest.approx(loss, rel=1e-12)
        assert run.step_info(step)["grad_norm_applied"] == pytest.approx(
            global_norm(grads.values()), rel=1e-12)


def test_gradscaler_skipped_step_is_recorded_as_skipped_with_an_alarm(tmp_path):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    lines, scaled = [], []
    with gx.watch(model, opt, tmp_path / "run", scaler=scaler) as rec:
        rec._report = lines.append
        for step in range(4):
            x, y = batch(step)
            if step == 1:
                x[0, 0] = float("inf")
            loss = nn.functional.mse_loss(model(x), y)
            scaler.scale(loss).backward()
            scaled.append(global_norm([p.grad for p in model.parameters()]))
            scaler.unscale_(opt)
            nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
    assert "step" not in type(scaler).__dict__ or scaler.step.__func__ is type(scaler).step
    run = gx.open_run(tmp_path / "run")
    assert run.steps == [1, 2, 3, 4]  # never a gap
    skipped = run.step_ledger(2)
    assert skipped.skipped and "GradScaler" in skipped.skip_reason
    assert skipped.nan_count + skipped.inf_count > 0 and skipped.grad_norm_applied is None
    assert skipped.scale == 1024.0
    assert len(lines) == 1 and "step 2 skipped by the GradScaler" in lines[0]
    for step in (1, 3, 4):
        led = run.step_ledger(step)
        assert not led.skipped and led.nan_count == 0
        assert led.scale == (1024.0 if step == 1 else 512.0)
        assert led.grad_norm_accumulated == pytest.approx(scaled[step - 1], rel=1e-12)
        assert led.clip_coef == pytest.approx(
            led.grad_norm_applied * led.scale / led.grad_norm_accumulated, rel=1e-12)
        assert led.grad_norm_applied == pytest.approx(0.5, rel=1e-5) and led.clipped
    out = subprocess.run([sys.executable, "-m", "gradexplorer", "inspect", str(tmp_path / "run"),
                          "--step", "2"], capture_output=True, text=True, check=True).stdout
    assert "SKIPPED" in out and "skipped 1" in out


@pytest.mark.parametrize("kind", ["adam", "adamw-amsgrad", "sgd-momentum"])
def test_optimizer_state_equals_float64_reference(tmp_path, kind):
    model = make_model(zero_bias=True)
    groups = [{"params": list(model[0].parameters()), "lr": 0.01},
              {"params": list(model[2].parameters()), "lr": 0.003}]
    opt = {"adam": lambda: torch.optim.Adam(groups, betas=(0.8, 0.95)),
           "adamw-amsgrad": lambda: torch.optim.AdamW(groups, amsgrad=True, weight_decay=0.1),
           "sgd-momentum": lambda: torch.optim.SGD(groups, momentum=0.9)}[kind]()
    names = {id(p): n for n, p in model.named_parameters()}
    with gx.watch(model, opt, tmp_path / "run") as rec:
        for step in range(3):
            x, y = batch(step)
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            opt.zero_grad()
            expected = {names[id(p)]: reference_state(opt, p, g)
                        for g in opt.param_groups for p in g["params"]}
        assert rec.ledger.lr == (0.01, 0.003)
    run = gx.open_run(tmp_path / "run")
    state, stats = run.optimizer_state(3), run.figures(3)
    assert set(state) == set(expected)
    for name, figures in expected.items():
        for key, want in figures.items():
            assert getattr(state[name], key) == pytest.approx(float(want), rel=1e-12), (name, key)
            assert stats[name][key] == getattr(state[name], key)
        other = {"exp_avg_norm", "exp_avg_sq_rms", "effective_lr", "momentum_norm"} - set(figures)
        assert all(getattr(state[name], key) is None for key in other)
    out = subprocess.run([sys.executable, "-m", "gradexplorer", "inspect", str(tmp_path / "run"),
                          "--step", "1"], capture_output=True, text=True, check=True).stdout
    assert "new (θ was 0)" in out and "inf" not in out.split("update")[1]
    assert ("‖m‖" in out) == kind.startswith("adam") and ("‖momentum‖" in out) == (kind == "sgd-momentum")


def test_a_run_written_before_the_ledger_still_opens(tmp_path):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gx.watch(model, opt, legacy_run(tmp_path / "run"), resume=True) as rec:  # format 2
        for step in range(2):
            x, y = batch(step)
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            rec.note_loss(loss)
            opt.step()
            opt.zero_grad()
    db = sqlite3.connect(tmp_path / "run" / "run.sqlite")
    db.execute("DROP TABLE ledger")
    db.execute("DROP TABLE param_steps")
    db.execute("UPDATE meta SET value = '1' WHERE key = 'version'")
    db.commit()
    db.close()
    run = gx.open_run(tmp_path / "run")
    info = run.step_info(2)
    assert info["grad_norm_applied"] == info["global_norm"] and info["iteration"] is None
    assert info["skipped"] is False and math.isfinite(info["loss"])
    assert [led.optimizer_step for led in run.ledger()] == [1, 2]
    assert run.optimizer_state(2) == {} and run.figures(2)["0.weight"]["lr"] is None
    out = subprocess.run([sys.executable, "-m", "gradexplorer", "inspect", str(tmp_path / "run")],
                         capture_output=True, text=True, check=True).stdout
    assert "accumulated" not in out and "0.weight" in out


def test_training_session_steps_carry_their_ledger():
    workload = gx.load_workload("example:mlp")
    session = gx.TrainingSession(workload, gx.session.SessionConfig(seed=0))
    result = session.step()
    grads = [p.grad for p in session.model.parameters() if p.grad is not None]
    led = result.ledger
    assert (led.optimizer_step, led.iteration, led.micro_batches) == (1, 1, 1)
    assert led.grad_norm_accumulated == pytest.approx(global_norm(grads), rel=1e-12)
    assert led.grad_norm_applied == led.grad_norm_accumulated and led.clip_coef == 1.0
    assert led.loss == result.loss and led.lr == (session.optimizer.param_groups[0]["lr"],)


def test_a_failing_step_point_is_one_warning_and_training_goes_on(tmp_path, monkeypatch):
    import gradexplorer.core.stats.optimizer_state as state_module

    def broken(*args):
        raise RuntimeError("state unreadable")

    monkeypatch.setattr(state_module, "optimizer_state", broken)
    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gx.watch(model, opt, tmp_path / "run") as rec:
            for step in range(3):
                x, y = batch(step)
                loss = nn.functional.mse_loss(model(x), y)
                loss.backward()
                rec.note_loss(torch.empty((), device="meta"))  # passes the call's check, unreadable
                opt.step()
                opt.zero_grad()
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert sum("optimizer state" in m for m in messages) == 1
    assert sum("loss" in m for m in messages) == 1
    run = gx.open_run(tmp_path / "run")
    assert run.steps == [1, 2, 3] and run.optimizer_state(3) == {}
    assert run.step_info(3)["loss"] is None and run.step_info(3)["grad_norm_accumulated"] > 0


def test_accumulated_norms_device_path_is_flat_in_the_parameter_count_and_never_syncs():
    import importlib.util
    from pathlib import Path

    from gradexplorer.core.steps.accumulated import grad_norms

    spec = importlib.util.spec_from_file_location(
        "bench_histograms", Path(__file__).resolve().parents[1] / "bench" / "histograms.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    counts = {}
    for count in (4, 40):
        grads = [torch.randn(3, 5) * (i + 1) for i in range(count)]
        with bench.OpCounter() as counter:
            norms = grad_norms(grads, numba=False)
        counts[count] = counter.ops
        want = [math.sqrt(float(g.double().square().sum())) for g in grads]
        np.testing.assert_allclose(norms.numpy(), want, rtol=1e-12)
        np.testing.assert_allclose(np.asarray(grad_norms(grads)), want, rtol=1e-12)  # Numba path
    assert counts[4] == counts[40] and sum(counts[4].values()) <= 3
    assert counts[4]["aten._local_scalar_dense"] == 0


def test_reentrant_checkpointing_counts_one_backward_per_backward(tmp_path):
    from torch.utils.checkpoint import checkpoint

    class Checkpointed(nn.Module):  # every parameter inside a reentrant checkpoint segment
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.a, self.b = nn.Linear(6, 8), nn.Linear(8, 3)

        def forward(self, x):
            hidden = checkpoint(lambda t: torch.tanh(self.a(t)), x, use_reentrant=True)
            return checkpoint(self.b, hidden, use_reentrant=True)

    model = Checkpointed()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gx.watch(model, opt, tmp_path / "run") as rec:
        for step in range(2):
            for mb in range(2):
                x, y = batch(2 * step + mb)
                nn.functional.mse_loss(model(x.requires_grad_()), y).backward()
            want = global_norm([p.grad for p in model.parameters()])
            opt.step()
            opt.zero_grad()
            assert (rec.ledger.micro_batches, rec.ledger.iteration) == (2, 2 * step + 2)
            assert rec.ledger.grad_norm_accumulated == pytest.approx(want, rel=1e-12)
