"""Every output path a command names is refused, in one line with exit status 2, when it is or
lies inside a run directory or a snapshot folder, is not a regular file, or already exists
(unless --overwrite): nothing the user owns is replaced behind their back."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

import gradexplorer as gx
from tests.share_helpers import write_run

MLP = ("--model", "example:mlp")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return write_run(tmp_path_factory.mktemp("outputs") / "run", steps=4)


def assert_intact(run_dir: Path, before: str) -> None:
    assert digest(run_dir / "run.sqlite") == before
    with gx.open_run(run_dir) as run:
        assert run.steps == [1, 2, 3, 4]
        assert all(run.figures(step) for step in run.steps)


def refused(result, *words: str) -> None:
    code, out, err = result
    assert code == 2, (out, err)
    assert err.count("\n") == 1, err
    for word in words:
        assert word in err, err


def test_a_report_over_the_runs_own_database_is_refused_and_the_run_is_intact(run_dir, run_cli):
    before = digest(run_dir / "run.sqlite")
    refused(run_cli("report", run_dir, "--out", run_dir / "run.sqlite"), "run directory")
    refused(run_cli("report", run_dir, "--out", run_dir / "run.sqlite", "--overwrite"),
            "run directory")
    refused(run_cli("report", run_dir, "--out", run_dir / "report.html"), "run directory")
    assert not (run_dir / "report.html").exists()
    assert_intact(run_dir, before)


def test_a_report_never_replaces_a_file_unless_asked(run_dir, tmp_path, run_cli):
    out = tmp_path / "existing.html"
    out.write_text("mine")
    refused(run_cli("report", run_dir, "--out", out), "already exists", "--overwrite")
    assert out.read_text() == "mine"
    code, _, err = run_cli("report", run_dir, "--out", out, "--overwrite")
    assert code == 0, err
    assert out.read_text().startswith("<!DOCTYPE html>")


def test_a_device_or_a_folder_is_never_replaced(run_dir, tmp_path, run_cli):
    refused(run_cli("report", run_dir, "--out", tmp_path, "--overwrite"), "folder")
    fifo = tmp_path / "pipe.html"
    os.mkfifo(fifo)
    refused(run_cli("report", run_dir, "--out", fifo, "--overwrite"), "not a regular file")
    assert fifo.is_fifo()
    if Path("/dev/full").exists():
        refused(run_cli("report", run_dir, "--out", "/dev/full", "--overwrite"), "not a regular file")
        assert Path("/dev/full").is_char_device()


def test_a_missing_folder_is_refused(run_dir, tmp_path, run_cli):
    refused(run_cli("report", run_dir, "--out", tmp_path / "nowhere" / "r.html"), "does not exist")


def test_exports_refuse_runs_and_existing_files(run_dir, tmp_path, run_cli):
    before = digest(run_dir / "run.sqlite")
    refused(run_cli("export", run_dir, "--to", "csv", run_dir / "rows.csv"), "run directory")
    refused(run_cli("export", run_dir, "--to", "tensorboard", run_dir), "run directory")
    refused(run_cli("export", run_dir, "--to", "wandb", run_dir / "wandb"), "run directory")
    out = tmp_path / "rows.csv"
    out.write_text("mine")
    refused(run_cli("export", run_dir, "--to", "csv", out), "already exists", "--overwrite")
    assert out.read_text() == "mine"
    assert run_cli("export", run_dir, "--to", "csv", out, "--overwrite")[0] == 0
    assert out.read_text().startswith("step,")
    assert_intact(run_dir, before)


def test_nothing_is_written_into_a_snapshot_folder(run_dir, tmp_path, run_cli):
    snapshots = tmp_path / "snaps"
    assert run_cli("run", *MLP, "--steps", "1", "--export", snapshots)[0] == 0
    (snapshot,) = snapshots.glob("step-*")
    files = {p: digest(p) for p in snapshot.rglob("*") if p.is_file()}
    refused(run_cli("report", run_dir, "--out", snapshot / "r.html"), "snapshot folder")
    refused(run_cli("report", run_dir, "--out", snapshot / "manifest.json", "--overwrite"),
            "snapshot folder")
    refused(run_cli("graph", *MLP, "--out", snapshot / "g.json"), "snapshot folder")
    refused(run_cli("run", *MLP, "--steps", "1", "--export", snapshot), "snapshot folder")
    refused(run_cli("run", *MLP, "--steps", "1", "--export", run_dir), "run directory")
    assert {p: digest(p) for p in snapshot.rglob("*") if p.is_file()} == files


def test_graph_and_screenshots_replace_a_file_only_with_overwrite(run_dir, tmp_path, run_cli):
    out = tmp_path / "g.json"
    out.write_text("mine")
    refused(run_cli("graph", *MLP, "--out", out), "already exists", "--overwrite")
    assert out.read_text() == "mine"
    assert run_cli("graph", *MLP, "--out", out, "--overwrite")[0] == 0
    assert out.read_text().startswith("{")
    shot = tmp_path / "shot.png"
    shot.write_bytes(b"mine")
    refused(run_cli("gui", *MLP, "--steps", "1", "--screenshot", shot), "already exists")
    refused(run_cli("open", run_dir, "--screenshot", shot), "already exists")
    refused(run_cli("open", run_dir, "--screenshot", run_dir / "shot.png"), "run directory")
    assert shot.read_bytes() == b"mine"
