"""Bad input gives one line and exit status 2, never a traceback; files follow the umask."""

from __future__ import annotations

import os
import resource
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_helpers import one_line_error

MODEL = ("--model", "example:mlp")
DATA = Path(__file__).parent / "data"


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


USER_MODELS = '''
import sys
import torch
from torch import nn
import gradexplorer


def frozen():
    model = nn.Linear(4, 2)
    model.requires_grad_(False)
    return model


def sparse():
    model = nn.Sequential(nn.Embedding(10, 4, sparse=True), nn.Flatten(), nn.Linear(12, 1))
    tokens = torch.randint(0, 10, (8, 3), generator=torch.Generator().manual_seed(0))
    return gradexplorer.session.Workload(model=model, make_batch=lambda step: (tokens, torch.zeros(8, 1)),
                                 loss_fn=nn.functional.mse_loss)
'''


@pytest.fixture
def user_models(tmp_path):
    path = tmp_path / "user_models.py"
    path.write_text(USER_MODELS)
    return path


@pytest.mark.parametrize("seed", [str(2**70), str(2**64), str(-(2**63) - 1)])
def test_seeds_outside_torchs_range(run_cli, seed):
    one_line_error(*run_cli("run", *MODEL, "--steps", "1", f"--seed={seed}"), "--seed", seed)


def test_seeds_at_torchs_limits_run(run_cli):
    for seed in (2**64 - 1, -(2**63)):
        code, _, err = run_cli("run", *MODEL, "--steps", "1", f"--seed={seed}")
        assert code == 0, err


def test_a_model_without_trainable_parameters(run_cli, user_models):
    one_line_error(*run_cli("run", "--model", f"{user_models}:frozen", "--input-shape", "3,4",
                            "--steps", "1"), "has no trainable parameters")


def test_sparse_gradients_with_an_optimizer_that_cannot_take_them(run_cli, user_models):
    spec = f"{user_models}:sparse"
    one_line_error(*run_cli("run", "--model", spec, "--optimizer", "adam", "--steps", "1"),
                   "optimizer 'adam' cannot take the sparse gradients of 0", "--optimizer sgd")
    code, out, err = run_cli("run", "--model", spec, "--optimizer", "sgd", "--steps", "2")
    assert code == 0 and "step 2/2" in out, err  # what the line names works


@pytest.mark.parametrize("flag", ["--device", "--model"])
def test_empty_device_or_model(run_cli, flag):
    argv = ["run", *MODEL, "--steps", "1", "--device", "cpu", f"{flag}= "]
    one_line_error(*run_cli(*argv), f"{flag} is empty")


def test_an_unknown_collapse_module_is_named(run_cli, tmp_path):
    one_line_error(*run_cli("graph", "--model", "example:lenet", "--out", tmp_path / "g.svg",
                            "--collapse-module", "fc9"), "--collapse-module 'fc9'", "fc1")
    one_line_error(*run_cli("graph", "--model", "example:lenet", "--out", tmp_path / "g.svg",
                            "--collapse", "1", "--expand", "nothing"), "--expand 'nothing'")
    code, _, err = run_cli("graph", "--model", "example:lenet", "--out", tmp_path / "g.svg",
                           "--collapse-module", "fc1")
    assert code == 0, err


def test_a_user_file_that_exits_at_import(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import sys\nimport torch\nsys.exit('usage: train.py DATA')\n"
                      "def build():\n    return torch.nn.Linear(2, 2)\n")
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    done = subprocess.run([sys.executable, "-m", "gradexplorer", "run", "--model",
                           f"{script}:build", "--steps", "1"], capture_output=True, text=True,
                          env=env, timeout=240)
    one_line_error(done.returncode, done.stdout, done.stderr, "train.py ended the program",
                   "sys.exit('usage: train.py DATA')", "train.py:3")


def test_a_full_disk_under_run_export_is_one_line(tmp_path):
    """A file-size limit makes every write past 200 kB fail as a full disk does."""
    def limited():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))

    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    done = subprocess.run([sys.executable, "-m", "gradexplorer", "run", "--model", "example:lenet",
                           "--steps", "2", "--export", str(tmp_path / "out")], env=env,
                          preexec_fn=limited, capture_output=True, text=True, timeout=240)
    one_line_error(done.returncode, done.stdout, done.stderr, "cannot write snapshot step-000002",
                   "File too large")
    assert [p.name for p in (tmp_path / "out").iterdir()] == []  # nothing half-written left
