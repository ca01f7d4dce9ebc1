"""Bad input gives one line and exit status 2, never a traceback; files follow the umask."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

MODEL = ("--model", "example:mlp")
DATA = Path(__file__).parent / "data"


def one_line_error(code: int, out: str, err: str, *words: str) -> None:
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gradexplorer: error: "), err
    assert "Traceback" not in out + err
    for word in words:
        assert word in lines[0], (word, lines[0])


def test_negative_momentum(run_cli):
    one_line_error(*run_cli("run", *MODEL, "--steps", "1", "--momentum", "-1"), "momentum", "-1")


@pytest.mark.parametrize("content", [b"", b"hello, I am text\n"])
def test_weights_that_are_no_torch_file(run_cli, tmp_path, content):
    weights = tmp_path / "x.pt"
    weights.write_bytes(content)
    one_line_error(*run_cli("run", *MODEL, "--steps", "1", "--weights", weights), "x.pt")


def test_graph_out_under_a_file_at_a_folder_and_under_proc(run_cli, tmp_path):
    (tmp_path / "afile").write_text("x")
    one_line_error(*run_cli("graph", *MODEL, "--out", tmp_path / "afile" / "x.svg"), "is a file")
    (tmp_path / "d.svg").mkdir()
    one_line_error(*run_cli("graph", *MODEL, "--out", tmp_path / "d.svg"), "is a folder")
    one_line_error(*run_cli("graph", *MODEL, "--out", "/proc/x.svg"), "/proc/x.svg")
    one_line_error(*run_cli("graph", *MODEL, "--out", "/proc/nothing/x.svg"), "does not exist")


def test_huge_input_shape(run_cli):
    code, out, err = run_cli("run", "--model", f"{DATA / 'my_model.py'}:build_module",
                             "--input-shape", "100000,100000,100000", "--steps", "1")
    one_line_error(code, out, err, "--input-shape", "GB")


@pytest.mark.parametrize("mask", [0o022, 0o002])
def test_graph_files_follow_the_umask(run_cli, tmp_path, mask):
    previous = os.umask(mask)
    try:
        code, _, err = run_cli("graph", *MODEL, "--out", tmp_path / "g.svg")
    finally:
        os.umask(previous)
    assert code == 0, err
    assert stat.S_IMODE((tmp_path / "g.svg").stat().st_mode) == 0o666 & ~mask


def test_gui_and_open_screenshot_under_a_file_end_at_once(run_cli, tmp_path):
    (tmp_path / "afile").write_text("x")
    shot = tmp_path / "afile" / "x.png"
    one_line_error(*run_cli("gui", *MODEL, "--steps", "1", "--screenshot", shot), "is a file")
    code, _, err = run_cli("run", *MODEL, "--steps", "1", "--export", tmp_path / "out")
    assert code == 0, err
    one_line_error(*run_cli("open", tmp_path / "out" / "step-000001", "--screenshot", shot),
                   "is a file")


def test_a_run_whose_hook_failed_summarises_it_at_the_end(run_cli, tmp_path):
    hooks = tmp_path / "badhook.py"
    hooks.write_text("def explode(module, grad_input, grad_output):\n    raise RuntimeError('boom')\n")
    code, out, err = run_cli("run", "--model", "example:lenet", "--steps", "2", "--hook",
                             f"fc1=file:{hooks}:explode", "--hook", "fc2=observe")
    assert code == 0, err
    lines = out.strip().splitlines()
    assert lines[-2].startswith("1 hook was detached during the run")
    assert lines[-1].startswith("  step 1: hook file:") and "RuntimeError: boom" in lines[-1]
    code, out, _ = run_cli("run", "--model", "example:lenet", "--steps", "1", "--hook", "fc2=observe")
    assert code == 0 and "detached during the run" not in out
