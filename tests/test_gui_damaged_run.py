"""A damaged run directory in the app: a dialog with one line, never an abort; the app goes on."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap

import torch
from torch import nn

import gradexplorer as gx
from tests.gui_helpers import TIMEOUT_MS


def write_run(path, steps=3):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gx.watch(model, opt, path, bins=8):
        for _ in range(steps):
            opt.zero_grad()
            model(torch.randn(5, 4)).square().mean().backward()
            opt.step()
    return path


def damage(path, sql):
    db = sqlite3.connect(path / "run.sqlite")
    db.executescript(sql)
    db.commit()
    db.close()


def test_open_run_in_the_app_shows_one_line_for_a_damaged_run(qtbot, make_window, tmp_path,
                                                              monkeypatch):
    from gradexplorer.gui import errors

    shown = []
    monkeypatch.setattr(errors.QMessageBox, "critical", lambda parent, title, text: shown.append(text))
    window = make_window()
    cases = {"DROP VIEW stats": "no stats table",
             "UPDATE histogram_rows SET counts = x'0201'": "column counts is 2 bytes",
             "UPDATE meta SET value = '{bad' WHERE key = 'structure'": "not valid JSON",
             "UPDATE meta SET value = '[1]' WHERE key = 'graph'": "meta 'graph'"}
    for i, (sql, words) in enumerate(cases.items()):
        bad = write_run(tmp_path / f"bad{i}")
        damage(bad, sql)
        assert window.file_actions.open_run(str(bad)) is None
        assert len(shown) == i + 1 and words in shown[-1] and "\n" not in shown[-1], shown
    follower = window.file_actions.open_run(str(write_run(tmp_path / "good")))
    assert follower is not None and window.controller.timeline.latest.step == 3


def test_a_run_damaged_while_followed_stops_following_with_a_dialog(qtbot, make_window, tmp_path,
                                                                    monkeypatch):
    from gradexplorer.gui import errors

    shown = []
    monkeypatch.setattr(errors.QMessageBox, "critical", lambda parent, title, text: shown.append(text))
    window = make_window()
    path = write_run(tmp_path / "run", steps=2)
    follower = window.file_actions.open_run(str(path))
    assert follower is not None and window.controller.timeline.latest.step == 2
    damage(path, "INSERT INTO steps VALUES (3, 0, 1.0, 56, 'lots', 0.1, 1)")
    with qtbot.waitSignal(follower.failed, timeout=TIMEOUT_MS):
        pass
    assert len(shown) == 1 and "column loss holds str 'lots'" in shown[0]
    assert not follower.following
    assert window.controller.timeline.latest.step == 2  # what was read stays shown


APP = textwrap.dedent("""
    import sys
    from pathlib import Path
    from gradexplorer.gui import errors
    errors.QMessageBox.critical = lambda parent, title, text: print("dialog:", text, flush=True)
    from gradexplorer.gui.app import open_run_window
    sys.exit(open_run_window(Path(sys.argv[1]), Path(sys.argv[2])))
""")


def test_the_app_opening_a_damaged_run_does_not_abort(tmp_path):
    """It aborted (SIGABRT, exit 134): the read failed after the window's training thread
    started, and the exception destroyed that QThread while it ran."""
    bad = write_run(tmp_path / "bad")
    damage(bad, "DROP TABLE histogram_rows")
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=os.getcwd())
    done = subprocess.run([sys.executable, "-c", APP, str(bad), str(tmp_path / "shot.png")],
                          env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert "dialog: run" in done.stdout and "no histogram_rows table" in done.stdout
    assert "Traceback" not in done.stderr
