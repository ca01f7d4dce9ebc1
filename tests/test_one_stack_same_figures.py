"""One snapshot writer: the same loop (the digits example, two SGD steps, an observe:capture hook)
exported by the app (Export now and export every step), by ``gradexplorer run --export`` and by
``watch(snapshot_every=1)`` gives the same snapshot contents: gradients and captured tensors bit
for bit, the same hooks, per-parameter statistics and histograms, and the same stats.csv
history."""

import csv
import json

import pytest
import torch
from safetensors.torch import load_file

import gradexplorer as gx
from gradexplorer.cli import main
from gradexplorer.core.model.spec import ModelOptions, load_workload
from gradexplorer.core.session.engine import SessionConfig, TrainingSession
from gradexplorer.gui.live_session import give_cores_back, open_live_session
from gradexplorer.gui.snapshot_jobs import export_now, start_periodic_export, stop_periodic_export

SPEC, HOOKED, STEPS = "example:digits", "fc1", 2
CONFIG = SessionConfig(device="cpu", seed=0)
# what legitimately differs between entry points: when, and what the model is called (watch
# sees an nn.Module, not a workload), and the digests of files that hold those
VARYING = {"created", "model", "model_description", "files", "manifest_sha256"}


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
    return now, tmp_path / "app-every" / now.name


def cli_snapshot(tmp_path):
    code = main(["run", "--model", SPEC, "--device", "cpu", "--steps", str(STEPS), "--export",
                 str(tmp_path / "cli"), "--snapshot-every", "1", "--hook", f"{HOOKED}=observe:capture"])
    assert code == 0
    return tmp_path / "cli" / f"step-{STEPS:06d}"


def watch_snapshot(tmp_path):
    session = TrainingSession(load_workload(SPEC, ModelOptions()), CONFIG)
    session.config.grad_norm = False
    with gx.watch(session.model, session.optimizer, tmp_path / "watch", snapshot_every=1,
                  hooks={HOOKED: "observe:capture"}):
        for _ in range(STEPS):
            session.step()
    return tmp_path / "watch" / "snapshots" / f"step-{STEPS:06d}"


def contents(path):
    manifest = json.loads((path / "manifest.json").read_text())
    for key in VARYING:
        manifest.pop(key)
    with open(path / "stats.csv", newline="") as f:
        rows = list(csv.reader(f))
    return manifest, load_file(str(path / "gradients.safetensors")), rows


@pytest.fixture
def one_thread(monkeypatch):
    """One torch thread for every entry point: the app leaves the GUI a core and a conv's
    backward sums in another order with another thread count (last-bit differences). The
    app's record of the count it lowered starts empty, so that giving the cores back cannot
    restore a count an earlier test left there."""
    from gradexplorer.gui import live_session

    monkeypatch.setattr(live_session, "_THREADS", {"before": None, "holders": set()})
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_every_entry_point_writes_the_same_snapshot(tmp_path, one_thread):
    app_now, app_every = app_snapshots(tmp_path)
    written = {"app, Export now": app_now, "app, export every step": app_every,
               "gradexplorer run --export": cli_snapshot(tmp_path),
               "watch(snapshot_every=1)": watch_snapshot(tmp_path)}
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


def test_watch_snapshots_name_the_hooks_that_shaped_the_step(tmp_path):
    """A once: hook acts on the first backward and leaves: step 1's snapshot still lists it
    (the hooks as they shaped that step's gradients), step 2's does not."""
    session, hook = TrainingSession(load_workload(SPEC, ModelOptions()), CONFIG), "once:scale:0.5"
    with gx.watch(session.model, session.optimizer, tmp_path / "run", snapshot_every=1,
                  hooks={HOOKED: hook}):
        for _ in range(STEPS):
            session.step()
    snaps = tmp_path / "run" / "snapshots"
    first = json.loads((snaps / "step-000001" / "manifest.json").read_text())["hooks"]
    second = json.loads((snaps / "step-000002" / "manifest.json").read_text())["hooks"]
    assert [(h["module"], h["action"]) for h in first] == [(HOOKED, hook)]
    assert second == []
