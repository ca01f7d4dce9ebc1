"""One model, one clipping, three drivers (a plain loop, Lightning, the HF Trainer): the same
two measuring points, so the same figures; the Trainer's own logged grad_norm is the recorded
gradient as accumulated."""

import pytest
import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.session import MonitorWarning

CLIP, LR, STEPS, ACCUM, BATCH = 0.05, 0.1, 3, 2, 4


def make_net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 1))


def dataset():
    g = torch.Generator().manual_seed(1)
    return torch.randn(STEPS * ACCUM * BATCH, 5, generator=g), torch.randn(STEPS * ACCUM * BATCH, 1,
                                                                           generator=g) * 20


def plain_loop(run_dir):
    net = make_net()
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    x, y = dataset()
    pre_clip = []
    with gx.watch(net, opt, run_dir) as rec:
        for step in range(STEPS):
            for mb in range(ACCUM):
                rows = slice((step * ACCUM + mb) * BATCH, (step * ACCUM + mb + 1) * BATCH)
                loss = nn.functional.mse_loss(net(x[rows]), y[rows])
                (loss / ACCUM).backward()
                rec.note_loss(loss)
            grads = [p.grad.double() for p in net.parameters()]
            pre_clip.append(float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))))
            nn.utils.clip_grad_norm_(net.parameters(), CLIP)
            opt.step()
            opt.zero_grad()
    return pre_clip


def lightning_run(run_dir):
    pl = pytest.importorskip("lightning.pytorch")
    from gradexplorer.integrations import GradexplorerLightningCallback

    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = make_net()

        def training_step(self, batch, batch_idx):
            return nn.functional.mse_loss(self.net(batch[0]), batch[1])

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=LR)

    x, y = dataset()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=BATCH)
    trainer = pl.Trainer(max_steps=STEPS, accelerator="cpu", logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, gradient_clip_val=CLIP,
                         accumulate_grad_batches=ACCUM,
                         callbacks=[GradexplorerLightningCallback(run_dir)])
    module = Module()
    trainer.fit(module, loader)
    return [n for n, _ in module.named_parameters()]


def hf_run(run_dir, tmp_path):
    transformers = pytest.importorskip("transformers")
    from gradexplorer.integrations import GradexplorerTrainerCallback

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = make_net()

        def forward(self, x, labels):
            return {"loss": nn.functional.mse_loss(self.net(x), labels)}

    class InOrder(transformers.Trainer):  # the plain loop's batch order
        def _get_train_sampler(self, *args, **kwargs):
            return torch.utils.data.SequentialSampler(self.train_dataset)

    x, y = dataset()
    rows = [{"x": a, "labels": b} for a, b in zip(x, y, strict=True)]
    model = Model()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda _: 1.0)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "hf"), max_steps=STEPS, per_device_train_batch_size=BATCH,
        gradient_accumulation_steps=ACCUM, max_grad_norm=CLIP, report_to=[], save_strategy="no",
        use_cpu=True, logging_steps=1, disable_tqdm=True, dataloader_drop_last=False)
    trainer = InOrder(model=model, args=args, train_dataset=rows, optimizers=(opt, sched),
                      callbacks=[GradexplorerTrainerCallback(run_dir)])
    trainer.train()
    return [entry["grad_norm"] for entry in trainer.state.log_history if "grad_norm" in entry]


def test_plain_lightning_and_hf_record_the_same_two_points(tmp_path):
    pre_clip = plain_loop(tmp_path / "plain")
    lightning_run(tmp_path / "lightning")
    logged = hf_run(tmp_path / "hf", tmp_path)
    runs = {k: gx.open_run(tmp_path / k) for k in ("plain", "lightning", "hf")}
    for name, run in runs.items():
        assert run.steps == [1, 2, 3], name
    plain = runs["plain"]
    for step in plain.steps:
        want = plain.step_info(step)
        assert want["grad_norm_accumulated"] == pytest.approx(pre_clip[step - 1], rel=1e-12)
        assert want["grad_norm_applied"] == pytest.approx(CLIP, rel=1e-5)
        assert want["clipped"] and want["micro_batches"] == ACCUM
        assert want["iteration"] == step * ACCUM
        for other in ("lightning", "hf"):
            got = runs[other].step_info(step)
            for key in ("grad_norm_accumulated", "grad_norm_applied", "clip_coef", "loss"):
                assert got[key] == pytest.approx(want[key], rel=1e-6), (other, step, key)
            for key in ("clipped", "micro_batches", "iteration", "skipped", "optimizer_step"):
                assert got[key] == want[key], (other, step, key)
        plain_stats = plain.figures(step)
        for other in ("lightning", "hf"):
            other_stats = runs[other].figures(step)
            for name, figures in plain_stats.items():
                mine = other_stats["net." + name]
                for key in ("norm", "grad_norm_accumulated", "update_ratio", "lr"):
                    assert mine[key] == pytest.approx(figures[key], rel=1e-5), (other, name, key)
    # the Trainer's own logged norm is the gradient as accumulated (pre-clip)
    assert len(logged) == STEPS
    for step, norm in zip(runs["hf"].steps, logged, strict=True):
        assert runs["hf"].step_info(step)["grad_norm_accumulated"] == pytest.approx(norm, rel=1e-6)


def test_lightning_gradscaler_skips_and_unscaled_losses(tmp_path):
    pl = pytest.importorskip("lightning.pytorch")
    from lightning.pytorch.plugins import MixedPrecision

    from gradexplorer.integrations import GradexplorerLightningCallback

    losses = []

    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = make_net()

        def training_step(self, batch, batch_idx):
            x, y = batch
            if batch_idx == 1:  # an Inf: the scaler skips this step
                x = x.clone()
                x[0, 0] = float("inf")
            loss = nn.functional.mse_loss(self.net(x).float(), y)
            losses.append(loss.item())
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=LR)

    x, y = dataset()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=BATCH)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    trainer = pl.Trainer(max_steps=4, accelerator="cpu", logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         gradient_clip_val=CLIP,
                         plugins=[MixedPrecision("16-mixed", "cpu", scaler=scaler)],
                         callbacks=[GradexplorerLightningCallback(tmp_path / "run")])
    with pytest.warns(MonitorWarning, match="step 2 skipped by the GradScaler"):  # said once
        trainer.fit(Module(), loader)
    run = gx.open_run(tmp_path / "run")
    assert run.steps == [1, 2, 3, 4]
    ledger = run.ledger()
    assert [led.skipped for led in ledger] == [False, True, False, False]
    assert [led.scale for led in ledger] == [1024.0, 1024.0, 512.0, 512.0]
    for led, loss in zip(ledger, losses, strict=True):
        assert led.loss == pytest.approx(loss, rel=1e-6)  # the loss, not the scaled one
    for led in (ledger[0], ledger[2], ledger[3]):
        assert led.clipped and led.grad_norm_applied == pytest.approx(CLIP, rel=1e-4)
        assert led.clip_coef == pytest.approx(
            led.grad_norm_applied * led.scale / led.grad_norm_accumulated, rel=1e-12)


@pytest.mark.parametrize("fused", [True, False])
def test_a_fused_optimizers_skipped_step_is_recorded_as_skipped(tmp_path, fused):
    """A fused optimizer (``_step_supports_amp_scaling``) is stepped even when the GradScaler
    found Inf: it skips the update inside its kernel. The step is recorded as skipped all the same."""
    net = make_net()
    opt = torch.optim.AdamW(net.parameters(), lr=LR, fused=fused)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    x, y = dataset()
    lines, weights = [], []
    with gx.watch(net, opt, tmp_path / "run", scaler=scaler) as rec:
        rec._report = lines.append
        for step in range(4):
            rows = slice(step * BATCH, (step + 1) * BATCH)
            xb = x[rows].clone()
            if step == 1:
                xb[0, 0] = float("inf")
            scaler.scale(nn.functional.mse_loss(net(xb), y[rows])).backward()
            scaler.unscale_(opt)
            nn.utils.clip_grad_norm_(net.parameters(), CLIP)
            before = [p.detach().clone() for p in net.parameters()]
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
            weights.append(all(torch.equal(a, b) for a, b in zip(before, net.parameters(), strict=True)))
    assert weights == [False, True, False, False]  # step 2 really was skipped
    run = gx.open_run(tmp_path / "run")
    assert run.steps == [1, 2, 3, 4]
    assert [led.skipped for led in run.ledger()] == [False, True, False, False]
    skipped = run.step_ledger(2)
    assert "GradScaler" in skipped.skip_reason and skipped.grad_norm_applied is None
    assert skipped.nan_count + skipped.inf_count > 0
    assert len(lines) == 1 and "step 2 skipped by the GradScaler" in lines[0]


def test_hf_trainer_fp16_gradscaler_skips_and_logs_the_unscaled_accumulated_norm(tmp_path):
    """The Trainer under fp16 with the GradScaler accelerate makes on a GPU (made by hand here:
    accelerate makes none on a CPU), its default optimizer, an Inf in the second batch."""
    transformers = pytest.importorskip("transformers")
    from gradexplorer.integrations import GradexplorerTrainerCallback

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = make_net()

        def forward(self, x, labels):
            return {"loss": nn.functional.mse_loss(self.net(x).float(), labels)}

    class InOrder(transformers.Trainer):
        def _get_train_sampler(self, *args, **kwargs):
            return torch.utils.data.SequentialSampler(self.train_dataset)

    x, y = dataset()
    x[BATCH, 0] = float("inf")  # the second step's first sample
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "hf"), max_steps=4, per_device_train_batch_size=BATCH,
        max_grad_norm=CLIP, report_to=[], save_strategy="no", use_cpu=True, fp16=True,
        logging_steps=1, disable_tqdm=True)
    trainer = InOrder(model=Model(), args=args, callbacks=[GradexplorerTrainerCallback(tmp_path / "run")],
                      train_dataset=[{"x": a, "labels": b} for a, b in zip(x, y, strict=True)])
    trainer.accelerator.scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)  # as on a GPU
    trainer.accelerator.native_amp = True
    with pytest.warns(MonitorWarning, match="step 2 skipped by the GradScaler"):  # said once
        trainer.train()
    logged = [e["grad_norm"] for e in trainer.state.log_history if "grad_norm" in e]
    run = gx.open_run(tmp_path / "run")
    ledger = run.ledger()
    assert [led.optimizer_step for led in ledger] == [1, 2, 3, 4]
    assert [led.skipped for led in ledger] == [False, True, False, False]
    assert [led.scale for led in ledger] == [1024.0, 1024.0, 512.0, 512.0]
    for led, norm in zip(ledger, logged, strict=True):
        if not led.skipped:  # the Trainer logs the unscaled pre-clip norm
            assert led.grad_norm_accumulated / led.scale == pytest.approx(norm, rel=1e-6)
            assert led.clipped and led.grad_norm_applied == pytest.approx(CLIP, rel=1e-4)
