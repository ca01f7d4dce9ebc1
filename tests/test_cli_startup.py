"""The command line answers at once (issue 37 item 2): ``gradexplorer --help``, ``--version`` and
each command's ``--help`` import none of torch, Numba, numpy, networkx, SciPy, safetensors or Qt,
and take at most 0.3 s more than ``python -c pass``; a bad flag is one line on stderr, exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gradexplorer.cli import COMMAND_MODULES

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "numba", "numpy", "scipy", "networkx", "sympy", "safetensors", "PySide6",
         "shiboken6", "pyqtgraph", "superqt", "qtpy")
MOST_EXTRA_SECONDS = 0.3  # what the issue allows above a bare interpreter's start

# `python -m gradexplorer ARGS` (the console script's `cli:main` too), then the heavy libraries
# it imported
AS_MODULE = r"""
import json, runpy, sys
wanted = set(json.loads(sys.argv[2]))
sys.argv = ["gradexplorer", *json.loads(sys.argv[1])]
try:
    runpy.run_module("gradexplorer", run_name="__main__", alter_sys=True)
    code = None
except SystemExit as done:
    code = done.code
heavy = sorted({m.partition(".")[0] for m in sys.modules} & wanted)
print("\n" + json.dumps([code, heavy]))
"""


def environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}


def run_module(*argv: str) -> tuple[object, list[str], str, str]:
    """(exit code, heavy modules imported, stdout before the result line, stderr)."""
    done = subprocess.run([sys.executable, "-c", AS_MODULE, json.dumps(argv), json.dumps(HEAVY)],
                          capture_output=True, text=True, timeout=120, env=environment(), cwd=ROOT)
    out, _, result = done.stdout.rstrip("\n").rpartition("\n")
    assert done.returncode == 0, done.stderr
    code, heavy = json.loads(result)
    return code, heavy, out, done.stderr


@pytest.mark.parametrize("argv", [["--help"], ["--version"], *([c, "--help"] for c in COMMAND_MODULES)],
                         ids=lambda argv: " ".join(argv))
def test_help_and_version_import_no_heavy_library(argv):
    code, heavy, out, err = run_module(*argv)
    assert code in (0, None) and heavy == [], (heavy, err)
    if argv == ["--version"]:
        import gradexplorer

        assert out.startswith(f"gradexplorer {gradexplorer.__version__}\n")
        assert "torch: " in out and "devices: cpu" in out
    else:
        assert out.startswith(f"usage: gradexplorer {argv[0] if len(argv) > 1 else ''}".rstrip())


def test_version_reads_torchs_build_as_torch_reports_it():
    """torch's version and CUDA build, read from its version.py, are the imported torch's."""
    import torch

    _code, _heavy, out, _err = run_module("--version")
    facts = dict(line.split(": ", 1) for line in out.splitlines()[1:])
    assert facts["torch"] == torch.__version__
    assert facts["cuda"] == (torch.version.cuda or "none") or \
        facts["cuda"].startswith("none (ROCm/HIP")


@pytest.mark.parametrize("argv, word", [(["run", "--bogus"], "--bogus"),
                                        (["--bogus"], "--bogus"),
                                        (["bogus"], "'bogus'"),
                                        (["run", "--steps", "x"], "--steps"),
                                        (["graph"], "--out")])
def test_a_bad_flag_is_one_line_and_exit_2_without_heavy_imports(argv, word):
    code, heavy, _out, err = run_module(*argv)
    lines = err.strip().splitlines()
    assert code == 2 and heavy == [], (code, heavy, err)
    assert len(lines) == 1 and lines[0].startswith("gradexplorer: error: ") and word in lines[0], err
    assert "--help`" in lines[0]  # it names the help to read


def best_seconds(command: list[str], tries: int = 5) -> float:
    """The least processor time (user + system) of ``tries`` runs of ``command``. Processor time,
    not the wall clock: on a shared, busy machine the clock also counts the wait for a core, while
    a start-up that reads no network or slow disk takes as long as it computes."""
    resource = pytest.importorskip("resource")
    best = float("inf")
    for _ in range(tries):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(command, capture_output=True, timeout=120, env=environment(), cwd=ROOT,
                       check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        best = min(best, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return best


def test_help_and_version_take_at_most_0_3_s_more_than_a_bare_python():
    bare = best_seconds([sys.executable, "-c", "pass"])
    for argv in (["--help"], ["--version"], ["run", "--help"]):
        took = best_seconds([sys.executable, "-m", "gradexplorer", *argv])
        assert took - bare <= MOST_EXTRA_SECONDS, (argv, took, bare)


def test_version_lists_the_gpus_the_nvidia_driver_lists(tmp_path, monkeypatch):
    """Without importing torch, --version names the GPUs from the driver's /proc listing (one
    folder per GPU, by PCI bus id) and says whether this torch build can drive them."""
    from gradexplorer.core.session import environment

    for bus, model in (("0000:41:00.0", "NVIDIA H100 80GB HBM3"), ("0000:01:00.0", "Tesla T4")):
        (tmp_path / bus).mkdir()
        (tmp_path / bus / "information").write_text(
            f"Model: \t\t {model}\nIRQ:   \t\t 36\nBus Location: \t {bus}\nDevice Minor: \t 0\n")
    monkeypatch.setattr(environment, "NVIDIA_PROC", tmp_path)
    gpus = environment.nvidia_gpus()
    assert gpus == ["Tesla T4", "NVIDIA H100 80GB HBM3"]  # PCI order
    cpu_build = environment.devices_text({"__version__": "2.5.0+cpu", "cuda": None}, gpus)
    assert cpu_build.startswith("cpu, NVIDIA GPUs 0: Tesla T4, 1: NVIDIA H100 80GB HBM3 (")
    assert "torch 2.5.0+cpu is built without CUDA" in cpu_build
    cuda_build = environment.devices_text({"__version__": "2.5.0+cu124", "cuda": "12.4"}, gpus)
    assert "--device cuda` checks" in cuda_build and "without CUDA" not in cuda_build
    monkeypatch.setattr(environment, "NVIDIA_PROC", tmp_path / "absent")
    monkeypatch.setenv("PATH", str(tmp_path))  # no driver listing and no nvidia-smi: cpu only
    assert environment.nvidia_gpus() == []
    assert environment.devices_text({"cuda": "12.4"}, []) in ("cpu", "cpu, mps if this torch "
                                                              "build has it (Apple silicon)")
