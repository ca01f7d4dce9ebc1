"""The Lightning Callback and transformers TrainerCallback record with watch (real packages, tiny
models, CPU): the run's figures equal the gradients at the optimizer step."""

import math

import pytest
import torch
from torch import nn

import gradexplorer as gx


def test_integrations_import_their_framework_only_when_used():
    import subprocess
    import sys

    code = ("import sys, gradexplorer.integrations as i; "
            "print('lightning' in sys.modules, 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_lightning_callback(tmp_path):
    pl = pytest.importorskip("lightning.pytorch")
    from gradexplorer.integrations import GradexplorerLightningCallback

    seen = {}

    class Tiny(pl.LightningModule):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.net = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 1))

        def training_step(self, batch, batch_idx):
            x, y = batch
            return nn.functional.mse_loss(self.net(x), y)

        def on_before_optimizer_step(self, optimizer):
            seen.update({n: p.grad.double().clone() for n, p in self.named_parameters()})

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    g = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(32, 4, generator=g), torch.randn(32, 1, generator=g))
    callback = GradexplorerLightningCallback(tmp_path / "run", bins=8)
    trainer = pl.Trainer(max_steps=4, accelerator="cpu", logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, callbacks=[callback])
    trainer.fit(Tiny(), torch.utils.data.DataLoader(data, batch_size=8))
    run = gx.open_run(tmp_path / "run")
    assert run.steps == [1, 2, 3, 4]
    stats = run.stats(4)
    assert list(stats) == list(seen)
    for name, grad in seen.items():
        assert stats[name].norm == pytest.approx(float(grad.norm()), rel=1e-12)
    assert math.isfinite(run.step_info(4)["loss"])


def test_transformers_trainer_callback(tmp_path):
    transformers = pytest.importorskip("transformers")
    from gradexplorer.integrations import GradexplorerTrainerCallback

    seen = {}

    class Capture(transformers.TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            seen.update({n: p.grad.double().clone() for n, p in model.named_parameters()
                         if p.grad is not None})

    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=40, n_positions=16,
                                     bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config)
    g = torch.Generator().manual_seed(0)
    rows = [{"input_ids": ids, "labels": ids} for ids in torch.randint(0, 40, (12, 8), generator=g)]
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=3, per_device_train_batch_size=4,
        report_to=[], save_strategy="no", use_cpu=True, logging_strategy="no",
        learning_rate=1e-3, disable_tqdm=True)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=rows,
                                   callbacks=[Capture(), GradexplorerTrainerCallback(tmp_path / "run")])
    trainer.train()
    run = gx.open_run(tmp_path / "run")
    assert run.steps == [1, 2, 3]
    stats = run.stats(3)
    assert set(stats) == set(seen)
    for name in ("lm_head.weight", "transformer.h.0.attn.c_attn.weight"):
        if name in seen:
            assert stats[name].norm == pytest.approx(float(seen[name].norm()), rel=1e-12)
    assert any(s.update_ratio and s.update_ratio > 0 for s in stats.values())
