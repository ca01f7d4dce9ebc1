"""The README's code runs verbatim after its set-up: its Workload saved as `my_model.py`, its
watch loop saved as `train.py` and run, then every line of every command block, in the order
the README gives them (step counts capped by GRADEXPLORER_MAX_STEPS, which the CLI reads, not by
editing the text)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
MAX_STEPS = "5"  # enough for the step-000005 the walkthrough inspects
MAX_LINES = 200  # a newcomer reads it in five minutes

# The set-up blocks are what CI itself runs (.ci/run); nothing else may be skipped.
SET_UP_BLOCKS = {
    "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/gradexplorer":
        "installs from the network and opens the app on a display",
    'python3 -m venv .venv && .venv/bin/pip install -e ".[test]" && .venv/bin/python -m pytest':
        "installs from the network and runs this whole suite (CI runs exactly this line)",
}
SUBPROCESS_COMMANDS = ("gui", "open")  # the app takes over the process: run it as the user would


def readme_text() -> str:
    return README.read_text(encoding="utf-8")


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", readme_text(), re.S)


def command_lines(block: str) -> list[list[str]]:
    """Each line's words as bash reads them (a `# comment` dropped)."""
    return [words for line in block.splitlines() if (words := shlex.split(line, comments=True))]


def runnable_blocks() -> list[str]:
    return [b for b in blocks("bash") if b.strip() not in SET_UP_BLOCKS]


def source_env() -> dict[str, str]:
    return dict(os.environ, QT_QPA_PLATFORM="offscreen",
                PYTHONPATH=str(README.parent) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def test_the_readme_is_short_and_every_block_is_accounted_for():
    assert len(readme_text().splitlines()) <= MAX_LINES
    assert {b.strip() for b in blocks("bash")} >= set(SET_UP_BLOCKS), \
        "a set-up block changed: update SET_UP_BLOCKS (and check .ci/run still finds the test command)"
    assert len(runnable_blocks()) == 2, "a new bash block in the README: the walkthrough below runs it"
    python = blocks("python")
    assert [("gradexplorer.session.Workload(" in b, "gx.watch(" in b) for b in python] == \
        [(True, False), (False, True)], "the README's Python blocks: my_model.py, then train.py"


def test_readme_walkthrough_runs_verbatim(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GRADEXPLORER_MAX_STEPS", MAX_STEPS)
    model_file, train_file = blocks("python")
    assert "save this as `my_model.py`" in readme_text() and "save this as `train.py`" in readme_text()
    (tmp_path / "my_model.py").write_text(model_file)
    (tmp_path / "train.py").write_text(train_file)
    trained = subprocess.run([sys.executable, "train.py"], env=source_env(), capture_output=True,
                             text=True, timeout=300)
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert "clip_coef" in trained.stdout and "norm" in trained.stdout  # the ledger and the stats it prints

    ran = []
    for block in runnable_blocks():
        for argv in command_lines(block):
            line = shlex.join(argv)
            assert argv[0] == "gradexplorer", line
            if argv[1] in SUBPROCESS_COMMANDS:
                proc = subprocess.run([sys.executable, "-m", "gradexplorer", *argv[1:]],
                                      env=source_env(), capture_output=True, text=True, timeout=240)
                code, err = proc.returncode, proc.stderr
            else:
                try:
                    code, _, err = run_cli(*argv[1:])
                except SystemExit as done:  # argparse's --version exits
                    code, err = done.code, ""
            assert code == 0, f"README line failed: {line}\n{err}"
            ran.append(line)
    assert len(ran) == sum(len(command_lines(b)) for b in runnable_blocks()) >= 15
    for made in ("lenet.svg", "lenet.json", "shot.png", "compare.png", "run.png", "exp1.html",
                 "exp1.csv", "out/step-000002", "out/step-000005"):
        assert (tmp_path / made).exists(), made


@pytest.mark.parametrize(("value", "steps"), [("2", 2), ("50", 10)])
def test_max_steps_variable_caps_steps(run_cli, monkeypatch, value, steps):
    monkeypatch.setenv("GRADEXPLORER_MAX_STEPS", value)
    code, out, err = run_cli("run", "--model", "example:mlp")  # 10 steps by default
    assert code == 0, err
    assert f"step {steps}/{steps}" in out


def test_a_bad_max_steps_value_is_one_line(run_cli, monkeypatch):
    monkeypatch.setenv("GRADEXPLORER_MAX_STEPS", "many")
    code, _, err = run_cli("run", "--model", "example:mlp")
    assert code == 2 and "GRADEXPLORER_MAX_STEPS" in err and err.count("\n") == 1
