"""One session stack: the same loop (the digits example, two SGD steps, an observe:capture hook
on fc1) recorded through the app's session (Export now and export every step), ``gradexplorer
run --export``, ``watch(snapshot_every=1)``, the Lightning callback and the transformers
Trainer callback writes the same figures and the same snapshot contents: gradients and captured
tensors bit for bit, the same hooks, per-parameter statistics and histograms, the same
stats.csv history, and each recorded step's figures equal to the app's, exactly."""

import csv
import json
import math

import pytest
import torch
from safetensors.torch import load_file
from torch import nn

import gradexplorer as gx
from gradexplorer.cli import main
from gradexplorer.core.model.spec import ModelOptions, load_workload
from gradexplorer.core.session.engine import SessionConfig, TrainingSession
from gradexplorer.gui.training.live_session import give_cores_back, open_live_session
from gradexplorer.gui.training.snapshot_jobs import export_now, start_periodic_export, stop_periodic_export

SPEC, HOOKED, STEPS = "example:digits", "fc1", 2
CONFIG = SessionConfig(device="cpu", seed=0)
WATCHED = {"snapshot_every": 1, "hooks": {HOOKED: "observe:capture"}}
# what legitimately differs between entry points: when, and what the model is called (watch
# sees an nn.Module, not a workload), and the digests of files that hold those
VARYING = {"created", "model", "model_description", "files", "manifest_sha256"}


def session():
    return TrainingSession(load_workload(SPEC, ModelOptions()), CONFIG)


def app_snapshots(tmp_path):
    live = open_live_session(SPEC, ModelOptions(), CONFIG)
    try:
        live.hooks.attach(HOOKED, "observe:capture")
        exporter = start_periodic_export(live, tmp_path / "app-every", 1, lambda step, path: None)
        for _ in range(STEPS):
            live.session.step()
        stop_periodic_export(live, exporter)
        now = export_now(live, tmp_path / "app-now")
    finally:
        live.hooks.detach_all()
        give_cores_back(None)
    return now, tmp_path / "app-every" / now.name, list(live.monitor.history)


def cli_snapshot(tmp_path):
    code = main(["run", "--model", SPEC, "--device", "cpu", "--steps", str(STEPS), "--export",
                 str(tmp_path / "cli"), "--snapshot-every", "1", "--hook", f"{HOOKED}=observe:capture"])
    assert code == 0
    return tmp_path / "cli" / f"step-{STEPS:06d}"


def watch_run(tmp_path):
    s = session()
    s.config.grad_norm = False
    with gx.watch(s.model, s.optimizer, tmp_path / "watch", **WATCHED):
        for _ in range(STEPS):
            s.step()
    return tmp_path / "watch"


def same_parameters(module: nn.Module, model: nn.Module) -> None:
    """``module`` holds ``model``'s children under the same names (so its parameters and module
    paths are the model's) and forwards through the model."""
    for name, child in model.named_children():
        module.add_module(name, child)
    module.forward_model = model.forward  # bound to the model, whose children these are


def lightning_run(tmp_path):
    pl = pytest.importorskip("lightning.pytorch")
    from gradexplorer.integrations import GradexplorerLightningCallback

    s = session()

    class Digits(pl.LightningModule):
        def __init__(self):
            super().__init__()
            same_parameters(self, s.model)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return s.workload.loss_fn(self.forward_model(x), y)

        def configure_optimizers(self):
            return s.optimizer

    batches = [s.workload.make_batch(step) for step in range(STEPS)]
    trainer = pl.Trainer(max_steps=STEPS, accelerator="cpu", logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         callbacks=[GradexplorerLightningCallback(tmp_path / "lightning", **WATCHED)])
    trainer.fit(Digits(), torch.utils.data.DataLoader(batches, batch_size=None))
    return tmp_path / "lightning"


def trainer_run(tmp_path):
    transformers = pytest.importorskip("transformers")
    from gradexplorer.integrations import GradexplorerTrainerCallback

    s = session()

    class Digits(nn.Module):
        def __init__(self):
            super().__init__()
            same_parameters(self, s.model)

        def forward(self, x, y):
            return {"loss": s.workload.loss_fn(self.forward_model(x), y)}

    class Batches(torch.utils.data.IterableDataset):  # in order, one whole batch per item
        def __iter__(self):
            return iter({"x": x, "y": y} for x, y in map(s.workload.make_batch, range(STEPS)))

    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=STEPS, per_device_train_batch_size=1,
        report_to=[], save_strategy="no", use_cpu=True, logging_strategy="no",
        max_grad_norm=0.0, disable_tqdm=True)
    constant = torch.optim.lr_scheduler.LambdaLR(s.optimizer, lambda _: 1.0)
    trainer = transformers.Trainer(
        model=Digits(), args=args, train_dataset=Batches(), data_collator=lambda rows: rows[0],
        optimizers=(s.optimizer, constant),
        callbacks=[GradexplorerTrainerCallback(tmp_path / "trainer", **WATCHED)])
    trainer.train()
    return tmp_path / "trainer"


def contents(path):
    manifest = json.loads((path / "manifest.json").read_text())
    for key in VARYING:
        manifest.pop(key)
    with open(path / "stats.csv", newline="") as f:
        rows = list(csv.reader(f))
    return manifest, load_file(str(path / "gradients.safetensors")), rows


def same_number(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def assert_same_figures(got: gx.StepGradients, want: gx.StepGradients, where: str) -> None:
    assert got.step == want.step and list(got.params) == list(want.params), where
    for name, stats in want.params.items():
        for field, value in stats.stats_dict().items():
            assert same_number(got.params[name].stats_dict()[field], value), (where, name, field)
        hist, want_hist = got.histograms[name], want.histograms[name]
        assert torch.equal(torch.as_tensor(hist.edges), torch.as_tensor(want_hist.edges)), (where, name)
        assert torch.equal(torch.as_tensor(hist.counts), torch.as_tensor(want_hist.counts)), (where, name)


def test_every_entry_point_writes_the_same_figures_and_snapshots(tmp_path, one_thread):
    app_now, app_every, app_history = app_snapshots(tmp_path)
    runs = {"watch": watch_run(tmp_path), "Lightning callback": lightning_run(tmp_path),
            "transformers Trainer callback": trainer_run(tmp_path)}
    written = {"app, Export now": app_now, "app, export every step": app_every,
               "gradexplorer run --export": cli_snapshot(tmp_path),
               **{where: run / "snapshots" / f"step-{STEPS:06d}" for where, run in runs.items()}}
    want_manifest, want_tensors, want_rows = contents(app_now)
    assert [h["module"] for h in want_manifest["hooks"]] == [HOOKED]
    assert any(k.startswith("hooks/") for k in want_tensors)  # the captured tensors are in
    assert {int(r[0]) for r in want_rows[1:]} == {1, 2}  # the history up to this step
    for where, path in written.items():
        manifest, tensors, rows = contents(path)
        assert manifest == want_manifest, where
        assert tensors.keys() == want_tensors.keys(), where
        for key, tensor in tensors.items():
            assert torch.equal(tensor, want_tensors[key]), (where, key)
        assert rows == want_rows, where
    assert [r.step for r in app_history] == list(range(1, STEPS + 1))
    for where, run_dir in runs.items():
        run = gx.open_run(run_dir)
        assert run.steps == [r.step for r in app_history], where
        for record in app_history:
            assert_same_figures(run.step_gradients(record.step), record, where)


def test_watch_snapshots_name_the_hooks_that_shaped_the_step(tmp_path):
    """A once: hook acts on the first backward and leaves: step 1's snapshot still lists it
    (the hooks as they shaped that step's gradients), step 2's does not."""
    s, hook = session(), "once:scale:0.5"
    with gx.watch(s.model, s.optimizer, tmp_path / "run", snapshot_every=1,
                  hooks={HOOKED: hook}):
        for _ in range(STEPS):
            s.step()
    snaps = tmp_path / "run" / "snapshots"
    first = json.loads((snaps / "step-000001" / "manifest.json").read_text())["hooks"]
    second = json.loads((snaps / "step-000002" / "manifest.json").read_text())["hooks"]
    assert [(h["module"], h["action"]) for h in first] == [(HOOKED, hook)]
    assert second == []
