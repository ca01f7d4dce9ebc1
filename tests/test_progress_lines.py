"""``export`` and ``report`` of a long run say how far they got on stderr every
PROGRESS_SECONDS (0 here: every step, every stage), and write the same files as without."""

from __future__ import annotations

import re

import pytest

from gradexplorer.commands import progress
from tests.share_helpers import write_run

STEPS = 6


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return write_run(tmp_path_factory.mktemp("progress") / "mlp-run", steps=STEPS)


@pytest.mark.parametrize("target", ["csv", "tensorboard"])
def test_export_says_which_step_it_reached(run_cli, run_dir, tmp_path, monkeypatch, target):
    if target == "tensorboard":
        pytest.importorskip("tensorboard")
    dest = {"csv": "rows.csv", "tensorboard": "tb"}[target]
    code, out, err = run_cli("export", run_dir, "--to", target, tmp_path / "quiet" / dest)
    assert code == 0 and err == "", err  # a quick export says nothing more
    monkeypatch.setattr(progress, "PROGRESS_SECONDS", 0.0)
    code, out_told, err = run_cli("export", run_dir, "--to", target, tmp_path / "told" / dest)
    assert code == 0, err
    assert err.splitlines() == [f"export: step {k} of {STEPS} ({100 * k // STEPS}%)"
                                for k in range(1, STEPS + 1)]
    assert out_told.replace("told", "quiet") == out
    if target == "csv":
        assert (tmp_path / "told" / dest).read_bytes() == (tmp_path / "quiet" / dest).read_bytes()


def test_report_says_what_it_reads(run_cli, run_dir, tmp_path, monkeypatch):
    code, out, err = run_cli("report", run_dir, "--out", tmp_path / "quiet.html", "--top", "2")
    assert code == 0 and err == "", err
    monkeypatch.setattr(progress, "PROGRESS_SECONDS", 0.0)
    code, out_told, err = run_cli("report", run_dir, "--out", tmp_path / "told.html", "--top", "2")
    assert code == 0, err
    lines = err.splitlines()
    assert lines[0] == f"report: reading the figures of {STEPS} steps"
    assert sum("(1 of 2 parameters drawn in full)" in line for line in lines) == 1
    assert lines[-1] == "report: drawing the page"
    assert all(line.startswith("report: ") for line in lines)
    assert (tmp_path / "told.html").read_bytes() == (tmp_path / "quiet.html").read_bytes()
    assert re.sub(r"told|[\d.]+ s\)", "", out_told) == re.sub(r"quiet|[\d.]+ s\)", "", out)
