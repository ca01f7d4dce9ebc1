"""The package installs, reports its version, and runs as a module and a console script."""

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import gradexplorer
from gradexplorer.core.model.workload import Workload as CoreWorkload
from gradexplorer.session import Workload

ROOT = Path(__file__).resolve().parents[1]


def test_version_text_names_libraries(capsys):
    from gradexplorer.cli import main

    try:
        main(["--version"])
    except SystemExit as exc:
        assert exc.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"gradexplorer {gradexplorer.__version__}\n")
    assert "torch: " in out and "PySide6: " in out and "devices: cpu" in out


def test_python_dash_m_runs_the_cli():
    proc = subprocess.run(
        [sys.executable, "-m", "gradexplorer", "--version"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("gradexplorer ")


def test_console_script_is_declared_and_runs():
    tomllib = pytest.importorskip("tomllib")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["scripts"]["gradexplorer"] == "gradexplorer.cli:main"
    try:
        metadata.distribution("gradexplorer")
    except metadata.PackageNotFoundError:
        pytest.skip("gradexplorer is not pip-installed in this environment")
    scripts = {ep.name: ep.value for ep in metadata.entry_points(group="console_scripts")}
    assert scripts.get("gradexplorer") == "gradexplorer.cli:main"
    exe = Path(sys.executable).with_name("gradexplorer")
    proc = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("gradexplorer "), proc.stderr


def test_workload_importable_from_top_package():
    assert Workload is CoreWorkload
