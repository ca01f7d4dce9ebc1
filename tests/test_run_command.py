"""``gradexplorer run``: a line per step, and one clear line with exit 2 on bad input."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
STEP_LINE = re.compile(r"^step (\d+)/(\d+)  loss [-+.\deE]+  grad-norm [-+.\deE]+  [\d.]+ ms$")


def step_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("step ")]


def test_run_lenet_three_steps(run_cli):
    code, out, err = run_cli("run", "--model", "example:lenet", "--steps", "3", "--device", "cpu")
    assert code == 0, err
    assert "61,706 parameters" in out.splitlines()[0]
    lines = step_lines(out)
    assert len(lines) == 3 and all(STEP_LINE.match(line) for line in lines)
    assert [STEP_LINE.match(line).group(1) for line in lines] == ["1", "2", "3"]


def test_run_user_workload_file(run_cli):
    code, out, err = run_cli("run", "--model", f"{DATA / 'my_model.py'}:build", "--steps", "4", "--seed", "1")
    assert code == 0, err
    assert len(step_lines(out)) == 4


def test_run_is_repeatable_with_a_seed(run_cli):
    def losses():
        code, out, _ = run_cli("run", "--model", "example:mlp", "--steps", "3", "--seed", "5")
        assert code == 0
        return [line.split()[3] for line in step_lines(out)]

    assert losses() == losses()


def test_run_options_reach_the_session(run_cli):
    code, out, err = run_cli(
        "run", "--model", "example:mlp", "--steps", "2", "--optimizer", "adam", "--lr", "0.003",
        "--batch-size", "4",
    )
    assert code == 0, err
    assert "adam lr 0.003" in out and "4×10 batch" in out


@pytest.mark.parametrize(
    "args, pattern",
    [
        (["--model", "missing.py:build"], r"model file not found: missing.py"),
        (["--model", "example:nope"], r"unknown example 'nope'"),
        (["--model", f"{DATA / 'tutorial_mlp.py'}:build", "--input-shape", "10,10"],
         r"forward pass failed in module 'fc1' \(Linear\)"),
        (["--model", f"{DATA / 'my_model.py'}:build_module", "--input-shape", "a,b"], r"bad shape 'a,b'"),
        (["--model", f"{DATA / 'my_model.py'}:build_wrong"], r"returned dict"),
        (["--model", "example:lenet", "--device", "cuda:7"], r"device 'cuda:7' is not available"),
        (["--model", "example:lenet", "--steps", "0"], r"argument --steps: must be at least 1"),
        (["--model", "example:lenet", "--weights", "nowhere.pt"], r"weights file not found"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(run_cli, args, pattern):
    if "cuda:7" in args:
        torch = pytest.importorskip("torch")
        if torch.cuda.device_count() > 7:
            pytest.skip("this machine has 8 CUDA devices")
    code, out, err = run_cli("run", *args)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("gradexplorer: error: ")
    assert re.search(pattern, err), err
    assert "Traceback" not in err + out


def test_run_as_a_process_exits_zero():
    proc = subprocess.run(
        [sys.executable, "-m", "gradexplorer", "run", "--model", "example:lenet", "--steps", "2"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert len(step_lines(proc.stdout)) == 2


def test_bad_input_as_a_process_has_no_traceback(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def build(:\n")
    proc = subprocess.run(
        [sys.executable, "-m", "gradexplorer", "run", "--model", f"{bad}:build"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 2
    expected = f"gradexplorer: error: syntax error in {bad}:1: invalid syntax"
    assert proc.stderr.strip().splitlines() == [expected]


def test_progress_bar_on_a_terminal():
    import io

    from gradexplorer.commands.progress import StepReporter
    from gradexplorer.core.session.engine import StepResult

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    stream = Terminal()
    reporter = StepReporter(4, stream)
    for i in (1, 2):
        reporter(StepResult(i, 0.5, 1.25, {"total": 0.002}))
    reporter.close()
    text = stream.getvalue()
    assert text.count("\r") == 2 and text.endswith("\n")
    assert "████████████············ step 2/4  loss 0.5  grad-norm 1.25  2.0 ms" in text
