"""docs/diagnose.md's worked spike and divergence hunts: the script and commands it shows give
the output it shows (numbers masked, so other CPUs' last digits do not matter)."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "diagnose.md").read_text(encoding="utf-8")


def masked(text: str) -> list[str]:
    return [re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "#", line).rstrip() for line in text.splitlines()]


def shown_output(command: str) -> list[str]:
    """The lines the doc shows after ``$ command`` (up to the next prompt or block end)."""
    block = DOC.split(f"$ {command}\n", 1)[1].split("```", 1)[0]
    return masked(block.split("\n$ ", 1)[0])


def test_the_worked_hunts_run_as_shown(tmp_path, run_cli, monkeypatch):
    script = "python docs/examples/spike_hunt.py runs"
    assert f"$ {script}\n" in DOC
    proc = subprocess.run([sys.executable, str(ROOT / "docs/examples/spike_hunt.py"), "runs"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=900,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert masked(proc.stdout) == shown_output(script)
    monkeypatch.chdir(tmp_path)
    for command in ("gradexplorer spikes runs/spiky", "gradexplorer diverge runs/lenet runs/lenet-hooked"):
        code, out, _ = run_cli(*command.split()[1:])
        assert code == 0
        assert masked(out) == shown_output(command), out
        assert ("step 300 to" in out and "1  side.weight" in out) or "diverged at step 5" in out
