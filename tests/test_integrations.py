"""The Lightning Callback and transformers TrainerCallback record with watch (real packages, tiny
models, CPU): the run's figures equal the gradients at the optimizer step."""

import math
from collections import Counter

import networkx as nx
import pytest
import torch
from torch import nn

import gradexplorer as gx


def recorded_graph(run):
    """The run's stored backward graph as networkx reads it."""
    return nx.node_link_graph(run.graph, edges="edges")


def names_from_root(G):
    """The operations' names on the first path from the root (slot 0 first)."""
    return [G.nodes[n]["name"] for n in nx.dfs_preorder_nodes(G, G.graph["root"])]


def op_modules(G):
    """How many operations of each name each module ran."""
    return Counter((a["name"], a["module"]) for _, a in G.nodes(data=True)
                   if a["kind"] in ("op", "loss"))


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
    callback = GradexplorerLightningCallback(tmp_path / "run", bins=8, noise_every=1)
    trainer = pl.Trainer(max_steps=4, accelerator="cpu", logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, callbacks=[callback])
    trainer.fit(Tiny(), torch.utils.data.DataLoader(data, batch_size=8))
    assert callback.recorder.noise.cadence is None  # noise_every=1 passed on ("auto": a cadence)
    run = gx.open_run(tmp_path / "run")
    assert run.steps == [1, 2, 3, 4]
    stats = run.stats(4)
    assert list(stats) == list(seen)
    for name, grad in seen.items():
        assert stats[name].norm == pytest.approx(float(grad.norm()), rel=1e-12)
    assert math.isfinite(run.step_info(4)["loss"])
    # the graph of training_step's loss (the module's own forward never runs), its modules named
    G = recorded_graph(run)
    assert G.nodes[0]["kind"] == "loss" and names_from_root(G)[:2] == [
        "DivBackward0", "MseLossBackward0"]
    assert set(op_modules(G)) == {
        ("AddmmBackward0", "net.0"), ("TBackward0", "net.0"), ("ReluBackward0", "net.1"),
        ("AddmmBackward0", "net.2"), ("TBackward0", "net.2"), ("MseLossBackward0", ""),
        ("DivBackward0", "")}  # the root: Lightning divides by accumulate_grad_batches


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
    # the graph of the Trainer's backward, from its root (the loss it scaled), modules named as
    # in the app's trace of the same model
    G = recorded_graph(run)
    assert G.nodes[0]["kind"] == "loss"
    model.train()
    live = gx.trace(model, {"input_ids": rows[0]["input_ids"].repeat(4, 1),
                            "labels": rows[0]["labels"].repeat(4, 1)})
    loss = next(n for n in nx.dfs_preorder_nodes(G, 0) if G.nodes[n]["name"] == "NllLossBackward0")
    assert op_modules(G.subgraph(nx.descendants(G, loss) | {loss})) == op_modules(live)


def test_lightning_callback_logs_scalars_to_the_trainers_logger(tmp_path):
    pl = pytest.importorskip("lightning.pytorch")
    from lightning.pytorch.loggers import Logger

    from gradexplorer.integrations import GradexplorerLightningCallback

    class Kept(Logger):
        name, version, logged = "kept", 0, []

        @property
        def experiment(self):
            return None

        def log_hyperparams(self, params):
            pass

        def log_metrics(self, metrics, step=None):
            self.logged.append((step, dict(metrics)))

    class Tiny(pl.LightningModule):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.net = nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            return nn.functional.mse_loss(self.net(batch[0]), batch[1])

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    g = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(32, 4, generator=g), torch.randn(32, 1, generator=g))
    callback = GradexplorerLightningCallback(tmp_path / "run", stats_every=2, log_scalars=True)
    trainer = pl.Trainer(max_steps=4, accelerator="cpu", logger=Kept(), log_every_n_steps=1,
                         gradient_clip_val=0.01, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, callbacks=[callback])
    trainer.fit(Tiny(), torch.utils.data.DataLoader(data, batch_size=8))
    run = gx.open_run(tmp_path / "run")
    logged = {step: m for step, m in Kept.logged if "gradexplorer/grad_norm" in m}
    assert sorted(logged) == [1, 3]  # Lightning's 0-based step of the batches of steps 2 and 4
    for step in (2, 4):
        ledger, m = run.step_ledger(step), logged[step - 1]
        assert m["gradexplorer/grad_norm"] == pytest.approx(ledger.grad_norm_applied, rel=1e-6)
        assert m["gradexplorer/grad_norm_accumulated"] == pytest.approx(
            ledger.grad_norm_accumulated, rel=1e-6)
        assert m["gradexplorer/clip_coef"] == pytest.approx(ledger.clip_coef, rel=1e-6)
        assert ledger.clip_coef < 1
        assert m["gradexplorer/skipped"] == 0.0


def tiny_gpt2_trainer(transformers, tmp_path, report_to, callbacks):
    """A Trainer of a one-layer GPT-2 over 12 fixed rows: 3 steps of 4, clipped to 0.01, logging
    every step to ``report_to``."""
    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=40, n_positions=16,
                                     bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    rows = [{"input_ids": ids, "labels": ids} for ids in torch.randint(0, 40, (12, 8), generator=g)]
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=3, per_device_train_batch_size=4,
        report_to=report_to, save_strategy="no", use_cpu=True, logging_steps=1,
        max_grad_norm=0.01, learning_rate=1e-3, disable_tqdm=True)
    return transformers.Trainer(model=transformers.GPT2LMHeadModel(config), args=args,
                                train_dataset=rows, callbacks=callbacks)


def test_trainer_callback_logs_scalars_into_the_trainers_logs(tmp_path):
    transformers = pytest.importorskip("transformers")
    from gradexplorer.integrations import GradexplorerTrainerCallback

    seen = []

    class Reporter(transformers.TrainerCallback):  # a reporting callback after gradexplorer's
        def on_log(self, args, state, control, logs=None, **kwargs):
            seen.append((state.global_step, dict(logs)))

    callback = GradexplorerTrainerCallback(tmp_path / "run", log_scalars=True)
    trainer = tiny_gpt2_trainer(transformers, tmp_path, [], [callback, Reporter()])
    trainer.train()
    run = gx.open_run(tmp_path / "run")
    training = [(step, logs) for step, logs in seen if "loss" in logs]
    assert [step for step, _ in training] == [1, 2, 3]
    history = [h for h in trainer.state.log_history if "loss" in h]
    for (step, logs), kept in zip(training, history, strict=True):
        ledger = run.step_ledger(step)
        assert logs["gradexplorer/grad_norm"] == pytest.approx(ledger.grad_norm_applied, rel=1e-6)
        assert logs["gradexplorer/clip_coef"] == pytest.approx(ledger.clip_coef, rel=1e-6)
        assert ledger.clip_coef < 1
        assert kept["gradexplorer/grad_norm"] == logs["gradexplorer/grad_norm"]


def test_trainer_callback_attached_first_logs_its_scalars_to_the_report_to_loggers(tmp_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from gradexplorer.integrations import GradexplorerTrainerCallback

    trainer = tiny_gpt2_trainer(transformers, tmp_path, ["tensorboard"], None)
    GradexplorerTrainerCallback(tmp_path / "run", log_scalars=True).attach(trainer)
    trainer.train()
    run = gx.open_run(tmp_path / "run")
    logged = {}  # TensorBoard's own reader over the Trainer's event files
    for events in (tmp_path / "out").rglob("events.*"):
        acc = EventAccumulator(str(events.parent)).Reload()
        for tag in acc.Tags()["scalars"]:
            logged.setdefault(tag, {}).update({e.step: e.value for e in acc.Scalars(tag)})
    norms, coefs = logged["train/gradexplorer/grad_norm"], logged["train/gradexplorer/clip_coef"]
    assert sorted(norms) == [1, 2, 3]
    for step in (1, 2, 3):
        ledger = run.step_ledger(step)
        assert norms[step] == pytest.approx(ledger.grad_norm_applied, rel=1e-6)  # float32 events
        assert coefs[step] == pytest.approx(ledger.clip_coef, rel=1e-6) and ledger.clip_coef < 1
        assert logged["train/gradexplorer/grad_norm_accumulated"][step] == pytest.approx(
            ledger.grad_norm_accumulated, rel=1e-6)


def test_trainer_callback_numbers_steps_by_the_trainers_global_step_on_resume(tmp_path):
    transformers = pytest.importorskip("transformers")
    from gradexplorer.integrations import GradexplorerTrainerCallback

    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=40, n_positions=16,
                                     bos_token_id=0, eos_token_id=0)
    g = torch.Generator().manual_seed(0)
    rows = [{"input_ids": ids, "labels": ids} for ids in torch.randint(0, 40, (16, 8), generator=g)]

    def trainer(steps, run_dir):
        torch.manual_seed(0)
        args = transformers.TrainingArguments(
            output_dir=str(tmp_path / "out"), max_steps=steps, per_device_train_batch_size=4,
            report_to=[], save_strategy="steps", save_steps=2, use_cpu=True,
            logging_strategy="no", learning_rate=1e-3, disable_tqdm=True)
        return transformers.Trainer(model=transformers.GPT2LMHeadModel(config), args=args,
                                    train_dataset=rows,
                                    callbacks=[GradexplorerTrainerCallback(run_dir)])

    trainer(2, tmp_path / "first").train()
    resumed = trainer(4, tmp_path / "resumed")
    resumed.train(resume_from_checkpoint=str(tmp_path / "out" / "checkpoint-2"))
    assert gx.open_run(tmp_path / "first").steps == [1, 2]
    assert gx.open_run(tmp_path / "resumed").steps == [3, 4] and resumed.state.global_step == 4
