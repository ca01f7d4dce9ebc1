"""A run directory deleted or replaced mid-training: one line, recording stops, training goes on,
nothing re-created; a ``snapshots`` that is a symbolic link is refused and never followed."""

from __future__ import annotations

import shutil
import sqlite3

import pytest
import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.core.messages.errors import UserError


def train(run_dir, after_step3, steps: int = 8, **options) -> tuple[list[str], list[float]]:
    """A real MLP trained ``steps`` steps under watch (a snapshot every step); ``after_step3``
    runs once step 3 is written. Returns the recorder's lines and the losses."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    lines, losses = [], []
    options = {"snapshot_every": 1, **options}
    with gx.Recorder(model, opt, run_dir, bins=8, report=lines.append, **options) as rec:
        for step in range(1, steps + 1):
            opt.zero_grad()
            loss = model(torch.randn(5, 4, generator=torch.Generator().manual_seed(step))
                         ).square().mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            if step == 3:
                rec.writer.flush()
                after_step3()
    return lines, losses


@pytest.mark.parametrize("snapshot_every", [1, None])  # noticed before a snapshot, or by the writer
def test_a_deleted_run_directory_stops_recording_in_one_line(tmp_path, snapshot_every):
    run_dir = tmp_path / "run"
    lines, losses = train(run_dir, lambda: shutil.rmtree(run_dir), snapshot_every=snapshot_every)
    assert len(losses) == 8  # training went on
    assert lines == [f"gradexplorer: run directory {run_dir} was deleted or replaced at step 4: "
                     "recording stopped; training goes on"]
    assert not run_dir.exists()  # no snapshots folder (nor run directory) made anew


def test_a_replaced_run_directory_is_left_alone(tmp_path):
    run_dir = tmp_path / "run"

    def replace():
        shutil.rmtree(run_dir)
        run_dir.mkdir()
        db = sqlite3.connect(run_dir / "run.sqlite")
        db.execute("CREATE TABLE mine (x)")
        db.execute("INSERT INTO mine VALUES (42)")
        db.commit()
        db.close()

    lines, losses = train(run_dir, replace)
    assert len(losses) == 8
    assert lines == [f"gradexplorer: run directory {run_dir} was deleted or replaced at step 4: "
                     "recording stopped; training goes on"]
    assert sorted(p.name for p in run_dir.iterdir()) == ["run.sqlite"]
    db = sqlite3.connect(run_dir / "run.sqlite")
    assert db.execute("SELECT name FROM sqlite_master").fetchall() == [("mine",)]
    assert db.execute("SELECT x FROM mine").fetchall() == [(42,)]
    db.close()


def test_a_symlinked_snapshots_folder_is_refused_and_not_followed(tmp_path):
    theirs = tmp_path / "theirs"
    (theirs / "step-000001").mkdir(parents=True)
    (theirs / "step-000001" / "notes.txt").write_text("mine")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "snapshots").symlink_to(theirs, target_is_directory=True)
    with pytest.raises(UserError, match="symbolic link") as err:
        train(run_dir, lambda: None)
    assert "\n" not in str(err.value)
    assert sorted(p.name for p in theirs.iterdir()) == ["step-000001"]
    assert (theirs / "step-000001" / "notes.txt").read_text() == "mine"
    assert list((theirs / "step-000001").iterdir()) == [theirs / "step-000001" / "notes.txt"]


def test_a_snapshots_link_made_mid_run_is_not_followed(tmp_path):
    theirs = tmp_path / "theirs"
    (theirs / "step-000005").mkdir(parents=True)
    (theirs / "step-000005" / "notes.txt").write_text("mine")
    run_dir = tmp_path / "run"

    def link():
        shutil.rmtree(run_dir / "snapshots")
        (run_dir / "snapshots").symlink_to(theirs, target_is_directory=True)

    lines, losses = train(run_dir, link)
    assert len(losses) == 8
    assert len(lines) == 1 and "symbolic link" in lines[0] and "training goes on" in lines[0]
    assert sorted(p.name for p in theirs.iterdir()) == ["step-000005"]
    assert (theirs / "step-000005" / "notes.txt").read_text() == "mine"
    with gx.open_run(run_dir) as run:  # recording stopped at the refused snapshot
        assert run.steps == [1, 2, 3, 4]
