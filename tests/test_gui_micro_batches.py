"""The app's "Micro-batches" spin box (issue 36): a typed value is committed by F7 like the other
spin boxes and applied between steps; the steps then have that many micro-batches, and the
parameter table's SNR column and the Optimizer tab's smoothed SNR and B_simple (with its band)
show the session's own noise scale (``SessionNoise``, docs/noise.md)."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt

from gradexplorer.core.watch.session_noise import SessionNoise
from gradexplorer.gui.panels.parameter_table import SNR
from gradexplorer.gui.text.number_text import format_number
from tests.gui_helpers import TIMEOUT_MS, open_model, optimizer_curve, wait_idle
from tests.test_gui_typed_values import type_into


def test_typed_micro_batches_train_accumulating_steps_and_show_the_snr(qtbot, make_window):
    window = make_window()
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=30_000)
    open_model(qtbot, window, "example:digits", batch_size=16)
    controls, live = window.run_controls, window.controller.session.live
    session, view, table = live.session, window.table, window.table.table
    assert controls.micro_spin.value() == 1 and view.isColumnHidden(SNR)  # no noise scale yet
    type_into(qtbot, controls.steps_spin, "3")
    type_into(qtbot, controls.micro_spin, "4")
    assert session.config.accumulate == 1  # typed, not yet committed
    qtbot.keyClick(controls.micro_spin.lineEdit(), Qt.Key_F7)
    qtbot.waitUntil(lambda: session.step_count == 3 and not window.busy(), timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    assert session.config.accumulate == 4 and session.micro_drawn == 12
    noise = next(r for r in live.stack.reporters if isinstance(r, SessionNoise)).latest
    assert noise.step == 3 and noise.parts == 4 and noise.batch == 16
    qtbot.waitUntil(lambda: not view.isColumnHidden(SNR), timeout=TIMEOUT_MS)
    shown = {table.rows[r][0]: table.data(table.index(r, SNR)) for r in range(table.rowCount())}
    assert shown == {n: format_number(float(v), 3) for n, v in zip(noise.names, noise.per["snr"],
                                                                    strict=True)}
    assert len(shown) == 8 and all(shown.values())

    curves, x, y = optimizer_curve(window, "fc1.weight", "fc1", "snr")
    assert list(x) == [1, 2, 3]
    assert y[-1] == pytest.approx(noise.per["snr_ema"][noise.names.index("fc1.weight")], rel=1e-12)
    curves, x, y = optimizer_curve(window, "fc1.weight", "fc1", "b_simple_ema")
    assert y[-1] == pytest.approx(noise.smoothed.b_simple, rel=1e-12) and np.isfinite(y).all()
    low, high = curves.band_low.getData()[1], curves.band_high.getData()[1]
    assert (low[-1], high[-1]) == pytest.approx((noise.smoothed.low, noise.smoothed.high), rel=1e-12)
    assert len(low) == 2  # the band from the second step on
    assert curves.readout.text() == (
        f"model · step 3: B_simple {format_number(noise.smoothed.b_simple, 4)} ±1 s.e. "
        f"{format_number(noise.smoothed.low, 4)}..{format_number(noise.smoothed.high, 4)}")

    controls.micro_spin.setValue(1)  # back to one: the next step has no noise scale
    qtbot.keyClick(controls.micro_spin.lineEdit(), Qt.Key_F6)
    qtbot.waitUntil(lambda: session.step_count == 4 and not window.busy(), timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    assert session.micro_drawn == 13
    qtbot.waitUntil(lambda: view.isColumnHidden(SNR), timeout=TIMEOUT_MS)
