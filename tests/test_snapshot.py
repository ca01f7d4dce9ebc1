"""Snapshots: what ``run --export`` writes, hook captures, atomic writes."""

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from grad_helpers import make_session
from safetensors.torch import load_file

from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.snapshot import read_snapshot, write_snapshot
from gradexplorer.core.snapshot import write as snapshot_write
from gradexplorer.core.stats.monitor import GradientMonitor

NAN_WORKLOAD = f"{Path(__file__).parent / 'grad_helpers.py'}:nan_workload"
STAT_NAMES = ["norm", "mean", "std", "min", "max", "abs_max", "zero_fraction", "nan_count",
              "inf_count"]


def test_lenet_export_holds_ten_gradients_that_match_their_stats(run_cli, tmp_path):
    code, out, err = run_cli("run", "--model", "example:lenet", "--steps", "5",
                             "--export", tmp_path / "out")
    assert code == 0, err
    snaps = sorted((tmp_path / "out").iterdir())
    assert [s.name for s in snaps] == ["step-000005"]
    assert "snapshot of step 5" in out
    tensors = load_file(snaps[0] / "gradients.safetensors")
    assert len(tensors) == 10 and sum(t.numel() for t in tensors.values()) == 61_706
    manifest = json.loads((snaps[0] / "manifest.json").read_text())
    assert manifest["format"] == "gradexplorer.snapshot" and manifest["step"] == 5
    assert manifest["model"] == "example:lenet" and manifest["total_numel"] == 61_706
    for key in ("version", "device", "dtype", "torch_version", "gradexplorer_version",
                "created", "hooks", "parameters"):
        assert key in manifest
    names = [p["name"] for p in manifest["parameters"]]
    assert sorted(names) == sorted(tensors) and names[:2] == ["conv1.weight", "conv1.bias"]
    for entry in manifest["parameters"]:
        g = tensors[entry["name"]].double().numpy().ravel()
        assert entry["shape"] == list(tensors[entry["name"]].shape) and entry["numel"] == g.size
        stats = entry["stats"]
        assert set(STAT_NAMES) <= set(stats)
        assert stats["norm"] == pytest.approx(np.linalg.norm(g), rel=1e-9)
        assert stats["std"] == pytest.approx(g.std(), rel=1e-9)
        assert stats["abs_max"] == pytest.approx(np.abs(g).max(), rel=1e-12)
        hist = entry["histogram"]
        assert sum(hist["counts"]) == g.size
        assert hist["counts"] == np.histogram(g, bins=np.array(hist["edges"]))[0].tolist()
    with open(snaps[0] / "stats.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 10 * 5 and {r["step"] for r in rows} == {"1", "2", "3", "4", "5"}
    last = [r for r in rows if r["step"] == "5"]
    assert [float(r["norm"]) for r in last] == [p["stats"]["norm"] for p in manifest["parameters"]]


def test_export_every_and_histogram_options(run_cli, tmp_path):
    code, out, err = run_cli("run", "--model", "example:lenet", "--steps", "5", "--export",
                             tmp_path, "--snapshot-every", "2", "--histogram-every", "3", "--bins", "8",
                             "--hist-range", "symmetric")
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-000002", "step-000004", "step-000005"]
    snap = read_snapshot(tmp_path / "step-000004")  # not a histogram step: filled in for export
    hist = snap.histograms["fc1.weight"]
    assert len(hist.counts) == 8 and hist.edges[0] == -hist.edges[-1]
    assert snap.manifest["histogram"] == {"bins": 8, "range": "symmetric"}


def test_run_prints_nothing_extra_unless_asked(run_cli):
    code, out, _ = run_cli("run", "--model", "example:lenet", "--steps", "2")
    assert code == 0 and len(out.strip().splitlines()) == 3


def test_nan_model_keeps_running_and_alarms(run_cli, tmp_path):
    code, out, err = run_cli("run", "--model", NAN_WORKLOAD, "--steps", "3",
                             "--export", tmp_path, "--snapshot-every", "1")
    assert code == 0, err
    alarms = [line for line in out.splitlines() if "NaN/Inf gradients" in line]
    assert len(alarms) == 3 and "p (3 NaN)" in alarms[0]
    snap = read_snapshot(tmp_path / "step-000001")
    assert snap.stats["p"].nan_count == 3 and snap.histograms["p"].nan_count == 3
    assert snap.histograms["p"].counts.sum() == 0
    assert np.isnan(snap.global_norm)
    assert torch.isnan(snap.gradients(["p"])["p"]).all()


def test_alarm_without_monitor_uses_the_grad_norm(run_cli):
    code, out, _ = run_cli("run", "--model", NAN_WORKLOAD, "--steps", "2")
    assert code == 0 and out.count("NaN/Inf gradients") == 2


def test_bad_gradient_options(run_cli, tmp_path):
    for args, message in ((["--bins", "0"], "--bins"), (["--snapshot-every", "2"], "--export DIR"),
                          (["--hist-range", "3,1"], "LO < HI"),
                          (["--histogram-every", "-1"], "--histogram-every")):
        code, _, err = run_cli("run", "--model", "example:lenet", "--steps", "1", *args)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_hook_captures_are_namespaced_and_listed(tmp_path):
    session = make_session()
    monitor = GradientMonitor()
    session.add_observer(monitor)
    result = session.step()
    hooks = [{"module": "fc1", "action": "observe", "calls": 1}]
    extra = {"fc1/grad_input.0": torch.ones(1, 400), "hooks/fc2/grad_output.0": torch.zeros(1, 84),
             "fc1/grad_input.1": None}
    path = write_snapshot(tmp_path, session, result.gradients, hooks=hooks,
                          extra_tensors=extra, history=monitor.history)
    snap = read_snapshot(path)
    assert snap.manifest["hooks"] == hooks
    assert sorted(snap.extra_tensors()) == ["hooks/fc1/grad_input.0", "hooks/fc2/grad_output.0"]
    assert len(snap.gradients()) == 10
    with pytest.raises(UserError, match="not a tensor"):
        write_snapshot(tmp_path, session, extra_tensors={"x": [1, 2]})


def test_snapshot_without_monitor_and_overwrite(tmp_path):
    session = make_session()
    session.step()
    first = write_snapshot(tmp_path, session)
    session.step()
    second = write_snapshot(tmp_path, session, name=first.name)
    assert second == first and read_snapshot(second).step == 2
    assert [p.name for p in tmp_path.iterdir()] == [first.name]


def test_failed_write_leaves_no_snapshot(tmp_path, monkeypatch):
    session = make_session()
    session.step()

    def failing_save(tensors, filename, metadata=None):
        with open(filename, "wb") as f:
            f.write(b"\x00" * 100)  # half a file, then the disk is full
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(snapshot_write, "save_file", failing_save)
    with pytest.raises(UserError, match="No space left"):
        write_snapshot(tmp_path, session)
    assert list(tmp_path.iterdir()) == []


def test_interrupted_write_never_looks_complete(tmp_path, monkeypatch):
    session = make_session()
    session.step()
    seen = {}

    def crash_at_rename(tmp, target):
        seen["tmp"] = tmp
        raise KeyboardInterrupt  # the process dies just before the rename

    monkeypatch.setattr(snapshot_write, "_replace_dir", crash_at_rename)
    with pytest.raises(KeyboardInterrupt):
        write_snapshot(tmp_path, session)
    assert seen["tmp"].name.startswith(".step-000001.partial-")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(UserError, match="no manifest"):
        read_snapshot(tmp_path)


def test_old_flag_names_still_work_with_a_note(run_cli, capsys, tmp_path):
    code, _, err = run_cli("run", "--model", "example:lenet", "--steps", "3", "--export", tmp_path,
                           "--export-every", "1", "--keep-last", "2", "--every", "2")
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-000002", "step-000003"]
    notes = [line for line in err.splitlines() if "the old name will go" in line]
    assert notes == [f"gradexplorer: {old} is now {new}; the old name will go in a later release"
                     for old, new in (("--export-every", "--snapshot-every"),
                                      ("--keep-last", "--keep-snapshots"),
                                      ("--every", "--histogram-every"))]
    with pytest.raises(SystemExit):
        run_cli("run", "--help")
    help_text = capsys.readouterr().out
    assert "--snapshot-every" in help_text and "--export-every" not in help_text
