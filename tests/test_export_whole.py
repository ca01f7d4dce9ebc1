"""``export --to tensorboard`` is whole or absent: killed, interrupted or out of disk space, it
leaves no events file TensorBoard's reader takes for a run, and the next export succeeds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.report import build_run  # noqa: E402

STEPS = 1500


@pytest.fixture(scope="module")
def big_run(tmp_path_factory):
    """A run whose export takes seconds: 1,500 steps x 20 parameters, a histogram each."""
    path = tmp_path_factory.mktemp("whole") / "big-run"
    build_run(path, STEPS, 20, bins=16)
    return path


def events_read(folder: Path) -> list[int]:
    """The steps TensorBoard's own reader finds under ``folder`` (its runs, as TensorBoard
    walks a log folder)."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer

    mux = EventMultiplexer(size_guidance={"scalars": 0})
    mux.AddRunsFromDirectory(str(folder))
    mux.Reload()
    return [e.step for run in mux.Runs() for e in mux.Scalars(run, "run/loss")]


def start_export(run: Path, dest: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "gradexplorer", "export", str(run), "--to",
                             "tensorboard", str(dest)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def kill_mid_export(proc: subprocess.Popen, dest: Path, signum: int) -> None:
    """Send ``signum`` once the export has written part of its events."""
    while proc.poll() is None:
        partial = [p for p in dest.glob(".*/*") if p.is_file() and p.stat().st_size > 100_000]
        if partial:
            proc.send_signal(signum)
            return
        time.sleep(0.01)
    pytest.fail(f"the export ended before it could be interrupted: {proc.communicate()}")


def test_an_export_killed_midway_leaves_nothing_a_reader_takes_for_a_run(big_run, tmp_path, run_cli):
    pytest.importorskip("tensorboard")
    dest = tmp_path / "tb"
    proc = start_export(big_run, dest)
    kill_mid_export(proc, dest, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert not (dest / big_run.name).exists()
    assert events_read(dest) == []
    assert [p for p in dest.rglob("*") if "tfevents" in p.name] == []
    code, out, err = run_cli("export", big_run, "--to", "tensorboard", dest)  # the re-run
    assert code == 0, err
    assert events_read(dest) == list(range(1, STEPS + 1))
    assert sorted(p.name for p in dest.iterdir()) == [big_run.name]  # the leftover is gone


def test_ctrl_c_exits_130_with_no_events_file(big_run, tmp_path):
    pytest.importorskip("tensorboard")
    dest = tmp_path / "tb"
    proc = start_export(big_run, dest)
    kill_mid_export(proc, dest, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    said = [line for line in err.splitlines() if not line.startswith("export: step ")]
    assert said == ["gradexplorer: interrupted"], err  # (a progress line is due after 5 s wall:
    # on a loaded machine the first block can take that long, and the line is not an error)
    assert list(dest.iterdir()) == []  # nor the staging folder
    assert events_read(dest) == []


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MB tmpfs (the export writes ~20 MB)."""
    folder = tmp_path / "small"
    folder.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip()}")
    yield folder
    subprocess.run(["umount", str(folder)], check=True)


def test_a_full_disk_is_one_line_and_exit_2_with_no_events_file(big_run, small_disk, run_cli):
    pytest.importorskip("tensorboard")
    dest = small_disk / "tb"
    code, _, err = run_cli("export", big_run, "--to", "tensorboard", dest)
    assert code == 2
    assert err.count("\n") == 1 and "No space left on device" in err, err
    assert list(dest.iterdir()) == []
    assert events_read(dest) == []

