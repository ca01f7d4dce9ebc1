"""``gradexplorer gui --steps N --screenshot FILE`` and the command-line entry points."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from tests.screenshot_helpers import ROOT, image_pixels, run_gradexplorer


def test_screenshot_writes_a_picture_of_the_trained_window(qapp, tmp_path):
    shot = tmp_path / "shots" / "main.png"
    done = run_gradexplorer("gui", "--model", "example:digits", "--batch-size", "16",
                            "--steps", "3", "--screenshot", str(shot), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"saved {shot}" in done.stdout
    pixels = image_pixels(shot)
    assert pixels.shape[0] >= 600 and pixels.shape[1] >= 1000
    assert len(np.unique(pixels)) > 100  # widgets, graph and plots, not a blank frame
    assert not list(shot.parent.glob(".*tmp*"))  # written atomically


def test_screenshot_of_a_bad_model_fails_with_one_line(tmp_path):
    done = run_gradexplorer("gui", "--model", "nowhere.py:build", "--screenshot",
                            str(tmp_path / "x.png"), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("gradexplorer: error: model file not found")
    assert not (tmp_path / "x.png").exists()


def test_gui_command_rejects_bad_arguments(run_cli):
    code, _, err = run_cli("gui", "--screenshot", "shot.gif")
    assert code == 2 and "use a .png or .jpg" in err


def test_run_command_never_imports_qt(tmp_path):
    code = ("import sys; from gradexplorer.cli import main; "
            "main(['run', '--steps', '1', '--batch-size', '8']); "
            "print('QT' if any(m.startswith(('PySide6', 'pyqtgraph')) for m in sys.modules) else 'NOQT')")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.stdout.strip().splitlines()[-1] == "NOQT", done.stderr


def test_window_size_and_theme_make_the_picture(qapp, tmp_path):
    shot = tmp_path / "dark.png"
    done = run_gradexplorer("gui", "--model", "example:digits", "--batch-size", "16", "--steps",
                            "1", "--window-size", "1024x700", "--theme", "dark", "--screenshot",
                            str(shot), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    pixels = image_pixels(shot)
    assert pixels.shape == (700, 1024)
    rgb = np.stack([(pixels >> s) & 0xFF for s in (16, 8, 0)], axis=-1)
    assert np.median(rgb.mean(axis=-1)) < 80  # mostly dark


def test_bad_window_size_is_one_line_and_status_2(tmp_path):
    done = run_gradexplorer("gui", "--window-size", "big", "--screenshot", "x.png", cwd=tmp_path)
    assert done.returncode == 2
    assert "expected WxH such as 1024x700" in done.stderr and "Traceback" not in done.stderr


def test_the_gui_without_a_model_opens_the_default_example(qapp, tmp_path):
    """`gradexplorer` / `gradexplorer gui` with no --model: the built-in example, as the README
    starts (no --model used to fail on its emptiness check)."""
    out = tmp_path / "default.png"
    done = run_gradexplorer("gui", "--screenshot", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert out.is_file() and image_pixels(out).shape[0] > 100
