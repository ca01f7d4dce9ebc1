"""``graph --out x.png`` is drawn by the app's own canvas: the same colours as the window."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from gradexplorer.core.graph.style import KIND_FILL
from tests.screenshot_helpers import ROOT, image_pixels, run_gradexplorer


def rgb32(colour: str) -> int:
    return 0xFF000000 | int(colour.lstrip("#"), 16)


def kind_pixels(pixels: np.ndarray) -> dict[str, int]:
    return {kind: int((pixels == rgb32(KIND_FILL[kind])).sum()) for kind in ("loss", "op", "param")}


def test_png_export_renders_offscreen_like_the_window(qapp, tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}  # no screen at all
    env["PYTHONPATH"] = str(ROOT)
    png = tmp_path / "lenet.png"
    done = subprocess.run([sys.executable, "-m", "gradexplorer", "graph", "--model", "example:lenet",
                           "--out", str(png)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr
    exported = image_pixels(png)
    shot = tmp_path / "window.png"
    done = run_gradexplorer("gui", "--model", "example:lenet", "--screenshot", str(shot), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    window = image_pixels(shot)
    for pixels in (exported, window):
        counts = kind_pixels(pixels)
        assert counts["loss"] > 200 and counts["op"] > 10 * 200 and counts["param"] > 10 * 200, counts
        text = ((pixels >> 16) & 0xFF) + ((pixels >> 8) & 0xFF) + (pixels & 0xFF) < 150
        assert text.sum() > 500  # labels
    assert not list(tmp_path.glob(".*tmp*"))  # written atomically
