"""``inspect`` and ``compare``: readable output, and one clear line for any bad snapshot."""

import json
import pickle
import shutil

import numpy as np
import pytest
import torch
from grad_helpers import make_session

from gradexplorer.core.snapshot import compare_snapshots, read_snapshot, write_snapshot
from gradexplorer.core.snapshot import format as snapshot_format
from gradexplorer.core.stats.monitor import GradientMonitor


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory):
    """Snapshots of steps 1-3 of LeNet."""
    root = tmp_path_factory.mktemp("snaps")
    session = make_session()
    monitor = GradientMonitor()
    session.add_observer(monitor)
    for result in session.run(3):
        write_snapshot(root, session, result.gradients, history=monitor.history)
    return root


@pytest.fixture
def snap_copy(export_dir, tmp_path):
    """A private copy of the step-2 snapshot, free to damage."""
    return shutil.copytree(export_dir / "step-000002", tmp_path / "copy")


def test_inspect_prints_a_row_per_parameter(run_cli, export_dir):
    code, out, err = run_cli("inspect", export_dir / "step-000003")
    assert code == 0, err
    snap = read_snapshot(export_dir / "step-000003")
    assert "step 3 of example:lenet" in out and "10 gradients, 61,706 numbers" in out
    lines = out.splitlines()
    assert lines[2].split()[:3] == ["parameter", "shape", "norm"]
    row = next(line for line in lines if line.startswith("fc1.weight"))
    assert "120×400" in row and f"{snap.stats['fc1.weight'].norm:.4g}" in row and "0/0" in row
    assert "|" in row  # the sparkline


def test_compare_snapshot_with_itself(run_cli, export_dir):
    result = compare_snapshots(export_dir / "step-000002", export_dir / "step-000002")
    for row in [*result.rows, result.total]:
        assert row.norm_ratio == pytest.approx(1.0) and row.cosine == pytest.approx(1.0)
        assert row.hist_distance == pytest.approx(0.0, abs=1e-12)
    code, out, _ = run_cli("compare", export_dir / "step-000002", export_dir / "step-000002")
    assert code == 0 and "(all gradients)" in out


def test_compare_two_steps_agrees_with_raw_tensors(run_cli, export_dir):
    a, b = read_snapshot(export_dir / "step-000001"), read_snapshot(export_dir / "step-000003")
    result = compare_snapshots(a, b)
    ga, gb = a.gradients(), b.gradients()
    for row in result.rows:
        x, y = ga[row.name].double().ravel(), gb[row.name].double().ravel()
        assert row.norm_ratio == pytest.approx(float(y.norm() / x.norm()), rel=1e-9)
        assert row.cosine == pytest.approx(float(x @ y / (x.norm() * y.norm())), rel=1e-9)
        assert row.hist_distance > 0
    x = torch.cat([g.double().ravel() for g in ga.values()])
    y = torch.cat([gb[n].double().ravel() for n in ga])
    assert result.total.cosine == pytest.approx(float(x @ y / (x.norm() * y.norm())), rel=1e-9)
    assert result.total.numel == 61_706
    code, out, _ = run_cli("compare", a.path, b.path)
    assert code == 0 and len([line for line in out.splitlines() if line.startswith("fc")]) == 6


def test_histogram_distance_of_shifted_histograms():
    from gradexplorer.core.stats.histogram import histogram_w1

    edges = np.linspace(0, 1, 11)
    counts = np.arange(10)
    assert histogram_w1(edges, counts, edges + 0.25, counts) == pytest.approx(0.25)


def expect_error(run_cli, *argv, match):
    code, out, err = run_cli(*argv)
    assert code == 2 and out == ""
    assert err.startswith("gradexplorer: error:") and len(err.strip().splitlines()) == 1, err
    assert match in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("command", ["inspect", "compare"])
def test_missing_and_foreign_directories(run_cli, tmp_path, export_dir, command):
    def run(path):
        return (command, path) if command == "inspect" else (command, export_dir / "step-000001", path)

    expect_error(run_cli, *run(tmp_path / "nope"), match="no such snapshot")
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "data.txt").write_text("hello")
    expect_error(run_cli, *run(tmp_path / "foreign"), match="not a gradexplorer snapshot")
    expect_error(run_cli, *run(tmp_path / "foreign" / "data.txt"), match="not a directory")
    expect_error(run_cli, *run(export_dir), match="holds 3 snapshot(s)")


def test_truncated_gradients(run_cli, snap_copy):
    path = snap_copy / "gradients.safetensors"
    path.write_bytes(path.read_bytes()[:-1000])
    expect_error(run_cli, "inspect", snap_copy, match="truncated")


def test_tampered_gradients(run_cli, snap_copy):
    path = snap_copy / "gradients.safetensors"
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF
    path.write_bytes(bytes(data))
    expect_error(run_cli, "inspect", snap_copy, match="sha256")


def test_tampered_manifest(run_cli, snap_copy):
    path = snap_copy / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["parameters"][0]["stats"]["norm"] = 1.0
    path.write_text(json.dumps(manifest))
    expect_error(run_cli, "inspect", snap_copy, match="modified")
    path.write_text(path.read_text()[:200])
    expect_error(run_cli, "inspect", snap_copy, match="unreadable or truncated")
    path.write_text(json.dumps({"format": "something.else", "version": 1}))
    expect_error(run_cli, "compare", snap_copy, snap_copy, match="not a gradexplorer snapshot")


def test_missing_stats_file(run_cli, snap_copy):
    (snap_copy / "stats.csv").unlink()
    expect_error(run_cli, "inspect", snap_copy, match="stats.csv is missing")


class Boom:
    """Unpickling this would create the file ``path``."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_pickle_in_place_of_safetensors_is_never_loaded(run_cli, snap_copy, tmp_path):
    marker = tmp_path / "unpickled"
    (snap_copy / "gradients.safetensors").write_bytes(pickle.dumps({"fc1.weight": Boom(marker)}))
    manifest_path = snap_copy / "manifest.json"
    manifest = json.loads(manifest_path.read_text())  # forge matching digests
    manifest["files"]["gradients.safetensors"] = snapshot_format.file_digest(
        snap_copy / "gradients.safetensors")
    manifest["manifest_sha256"] = snapshot_format.manifest_digest(manifest)
    manifest_path.write_text(json.dumps(manifest))
    expect_error(run_cli, "inspect", snap_copy, match="not a readable safetensors file")
    assert not marker.exists()


def test_compare_models_without_common_gradients(run_cli, export_dir, tmp_path):
    session = make_session("example:mlp")
    session.step()
    other = write_snapshot(tmp_path, session)
    expect_error(run_cli, "compare", export_dir / "step-000001", other,
                 match="no gradients of the same name and shape")
