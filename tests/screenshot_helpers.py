"""Running the ``gradexplorer`` command in a fresh process and reading the pictures it writes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def run_gradexplorer(*args: str, cwd) -> subprocess.CompletedProcess:
    """``python -m gradexplorer ARGS`` offscreen, this checkout's code, in ``cwd``."""
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "gradexplorer", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)


def image_pixels(path) -> np.ndarray:
    """The picture at ``path`` as a height × width array of 0xAARRGGBB pixels."""
    from PySide6.QtGui import QImage

    image = QImage(str(path)).convertToFormat(QImage.Format_RGB32)
    assert not image.isNull()
    buffer = image.constBits()
    return np.frombuffer(buffer, dtype=np.uint32, count=image.width() * image.height()).reshape(
        image.height(), image.width()).copy()
