"""The app on a run recorded with ``watch(noise_every=3)`` (docs/noise.md, "Cost"): the SNR column
shows each recorded step's figures and, at a step the cadence left out, empty cells (never zeros
or the last recorded step's); the smoothed SNR and B_simple curves join the recorded steps only."""

from __future__ import annotations

import numpy as np
import pytest

from gradexplorer.core.runs.noise_rows import noise_params, noise_rows, snr_curve
from gradexplorer.core.runs.run import Run
from gradexplorer.gui.panels.parameter_table import SNR
from gradexplorer.gui.text.number_text import format_number
from tests.gui_helpers import TIMEOUT_MS, accumulated_run, optimizer_curve


def test_a_cadence_runs_steps_without_figures_show_none(qtbot, make_window, tmp_path):
    accumulated_run(tmp_path / "run", 7, k=4, noise_every=3)
    with Run(tmp_path / "run") as run:
        stored = {s: {n: p["snr"] for n, p in noise_params(run, s).items()} for s in (4, 7)}
        steps, _, smoothed = snr_curve(run, "2.weight")
        rows = noise_rows(run)
    assert steps == [r["step"] for r in rows] == [1, 4, 7]
    window = make_window()
    view, table = window.table, window.table.table
    assert window.file_actions.open_run(str(tmp_path / "run")) is not None
    qtbot.waitUntil(lambda: not view.isColumnHidden(SNR) and window.controller.timeline.latest
                    is not None and window.controller.timeline.latest.step == 7, timeout=TIMEOUT_MS)

    def column() -> dict[str, str]:
        return {table.rows[r][0]: table.data(table.index(r, SNR)) for r in range(table.rowCount())}
    assert column() == {n: format_number(v, 3) for n, v in stored[7].items()}
    window.selection.select(step=5, source="test")  # a step the cadence left out
    qtbot.waitUntil(lambda: window.step_follow.shown().step == 5, timeout=TIMEOUT_MS)
    assert not view.isColumnHidden(SNR) and set(column().values()) == {""}
    window.selection.select(step=4, source="test")
    qtbot.waitUntil(lambda: window.step_follow.shown().step == 4, timeout=TIMEOUT_MS)
    assert column() == {n: format_number(v, 3) for n, v in stored[4].items()}
    curves, x, y = optimizer_curve(window, "2.weight", "2", "snr")  # joined over 1, 4, 7
    assert list(x) == [1, 4, 7] and y == pytest.approx(np.array(smoothed, float), rel=1e-12)
    curves.choose("b_simple_ema")
    curves.refresh()
    x, y = curves.curve.getData()
    assert list(x) == [1, 4, 7]
    assert y == pytest.approx(np.array([np.nan if r["b_simple_ema"] is None else r["b_simple_ema"]
                                        for r in rows]), rel=1e-12, nan_ok=True)
