"""The status bar names the model whole where it counts: a long spec loses its folders from
the left, never the device after it (GPT-2 at 1024×700 read "…example… · 3,700,224 params · cp")."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.gui_helpers import open_model


def test_a_long_model_spec_keeps_its_file_and_the_device(qtbot, make_window, tmp_path):
    folder = tmp_path / "experiments" / "a-rather-long-folder-name-for-this-week" / "models"
    folder.mkdir(parents=True)
    shutil.copy(Path(__file__).parent / "data" / "nan_sqrt_model.py", folder)
    spec = f"{folder / 'nan_sqrt_model.py'}:build"
    window = make_window()
    window.resize(1024, 700)
    open_model(qtbot, window, spec, batch_size=None)
    label = window.status.model_label
    text = label.text()
    assert label.fontMetrics().horizontalAdvance(text) <= label.contentsRect().width(), text
    assert text.startswith("…/") and text.endswith("/nan_sqrt_model.py:build · 212 params · cpu"), text
    assert spec.endswith("/" + text[2:].split(" · ")[0])  # whole folders dropped, none cut
    assert label.toolTip() == f"{spec} · 212 params · cpu"
