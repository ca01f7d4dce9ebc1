"""The README's command blocks run verbatim after its set-up (step counts capped by
GRADEXPLORER_MAX_STEPS, which the CLI reads, not by editing the text)."""

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

# Blocks and lines the test cannot run here, each with the reason.
SKIPPED_BLOCKS = {
    "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/gradexplorer":
        "installs from the network and opens the app on a display",
    'python3 -m venv .venv && .venv/bin/pip install -e ".[test]" && .venv/bin/python -m pytest':
        "installs from the network and runs this whole suite",
    """gradexplorer inspect runs/exp1 [--step K]         # a table of one step (default: the last)
gradexplorer compare runs/exp1 runs/exp2          # last steps of two runs; --steps K L
gradexplorer compare runs/exp1 --steps 100 2000   # two steps of one run
gradexplorer open runs/exp1                       # the app follows the run (File → Open run)""":
        "a usage synopsis ([--step K]) over run directories of the user's own training; "
        "tests/test_run_commands.py and tests/test_gui_run.py run these commands on real runs",
    """gradexplorer export runs/exp1 --to tensorboard tb/      # exact histograms, norms, loss
gradexplorer export runs/exp1 --to wandb wb/            # an offline wandb run; `wandb sync` uploads it
gradexplorer export runs/exp1 --to csv exp1.csv         # long form: step x parameter x figure (--to parquet)
gradexplorer report runs/exp1 --out exp1.html           # one self-contained HTML file, no network to view""":
        "run directories of the user's own training; tests/test_export.py, test_export_wandb.py "
        "and test_report.py run these commands on real runs",
}
SKIPPED_LINES = {
    "gradexplorer open out/step-000005 --compare out/step-000002":
        "opens a window and waits for the user to close it",
}
ACTIVATE = "source .venv/bin/activate"
SUBPROCESS_COMMANDS = ("gui",)  # the app takes over the process: run it as the user would


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def command_lines(block: str) -> list[str]:
    return [line.split("#")[0].strip() for line in block.splitlines() if line.split("#")[0].strip()]


def test_every_bash_block_is_run_or_skipped_with_a_reason():
    known = {b.strip() for b in SKIPPED_BLOCKS}
    runnable = [b for b in blocks("bash") if b.strip() not in known]
    assert len(runnable) == 1, "a new bash block in the README: run it here or say why not"
    assert "python3 -m venv .venv" in next(iter(SKIPPED_BLOCKS))  # the set-up makes .venv
    assert all(b.strip() in {x.strip() for x in blocks("bash")} for b in SKIPPED_BLOCKS), \
        "a skipped block is no longer in the README: drop it here"


def test_readme_walkthrough_runs_verbatim(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GRADEXPLORER_MAX_STEPS", MAX_STEPS)
    model_file = next(b for b in blocks("python") if "gradexplorer.Workload(" in b)
    assert "save this as `my_model.py`" in README.read_text()
    (tmp_path / "my_model.py").write_text(model_file)
    (block,) = [b for b in blocks("bash") if b.strip() not in {s.strip() for s in SKIPPED_BLOCKS}]
    lines = command_lines(block)
    assert lines[0] == ACTIVATE, "later lines call bare `gradexplorer`: activate the venv first"
    ran = []
    for line in lines[1:]:
        if line in SKIPPED_LINES:
            continue
        argv = shlex.split(line)
        assert argv[0] == "gradexplorer", line
        if argv[1] in SUBPROCESS_COMMANDS:
            env = dict(os.environ, QT_QPA_PLATFORM="offscreen",
                       PYTHONPATH=str(README.parent) + os.pathsep + os.environ.get("PYTHONPATH", ""))
            proc = subprocess.run([sys.executable, "-m", "gradexplorer", *argv[1:]], env=env,
                                  capture_output=True, text=True, timeout=240)
            code, err = proc.returncode, proc.stderr
        else:
            try:
                code, _, err = run_cli(*argv[1:])
            except SystemExit as done:  # argparse's --version exits
                code, err = done.code, ""
        assert code == 0, f"README line failed: {line}\n{err}"
        ran.append(line)
    assert len(ran) == len(lines) - 1 - len(SKIPPED_LINES)
    assert (tmp_path / "lenet.svg").is_file() and (tmp_path / "shot.png").is_file()
    assert (tmp_path / "out" / "step-000002").is_dir() and (tmp_path / "out" / "step-000005").is_dir()


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
