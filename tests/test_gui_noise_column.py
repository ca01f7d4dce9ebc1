"""The app's gradient SNR (docs/noise.md): the parameter table's SNR column, shown with a run that
recorded a noise scale (each parameter's SNR at the step shown, as the run stores it) and hidden
for a run without; the Optimizer tab's "SNR (noise scale)" curve, the stored smoothed SNR."""

from __future__ import annotations

import numpy as np
import pytest

from gradexplorer.core.runs.noise_rows import noise_params, snr_curve
from gradexplorer.core.runs.run import Run
from gradexplorer.gui.panels.parameter_table import COLUMNS, SNR
from gradexplorer.gui.text.number_text import format_number
from tests.gui_helpers import TIMEOUT_MS, accumulated_run, optimizer_curve


def test_the_snr_column_shows_the_runs_snr_and_hides_without_one(qtbot, make_window, tmp_path):
    accumulated_run(tmp_path / "noisy", 3, k=4, noise_every=1)
    accumulated_run(tmp_path / "plain", 3, k=1)  # the default noise_every="auto": no noise scale
    with Run(tmp_path / "noisy") as run:
        stored = {n: p["snr"] for n, p in noise_params(run, 3).items()}
    window = make_window()
    view, table = window.table, window.table.table
    assert window.file_actions.open_run(str(tmp_path / "noisy")) is not None
    qtbot.waitUntil(lambda: not view.isColumnHidden(SNR), timeout=TIMEOUT_MS)
    assert COLUMNS[SNR] == "SNR"
    shown = {table.rows[r][0]: table.data(table.index(r, SNR)) for r in range(table.rowCount())}
    assert shown == {n: format_number(v, 3) for n, v in stored.items()}
    with Run(tmp_path / "noisy") as run:
        steps, _, smoothed = snr_curve(run, "2.weight")
    curves, x, y = optimizer_curve(window, "2.weight", "2", "snr")
    assert list(x) == steps == [1, 2, 3]
    assert y == pytest.approx(np.array(smoothed, float), rel=1e-12)
    assert curves.plot.getPlotItem().getAxis("left").labelText == "SNR, smoothed"
    assert window.file_actions.open_run(str(tmp_path / "plain")) is not None
    qtbot.waitUntil(lambda: view.isColumnHidden(SNR) and window.controller.timeline.latest is not None
                    and window.controller.timeline.latest.step == 3, timeout=TIMEOUT_MS)
