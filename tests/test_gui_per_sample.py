"""The "Per-sample" dock: ticked, each step's per-sample norms drawn (histogram, top samples)."""

from __future__ import annotations

import numpy as np

from tests.gui_helpers import TIMEOUT_MS, open_model, wait_idle


def test_the_per_sample_dock_draws_the_newest_steps_norms(qtbot, make_window, tmp_path):
    window = make_window()
    open_model(qtbot, window, "example:transformer", batch_size=8)
    window.build_plots()
    panel = window.forensics.per_sample
    assert panel.observer is None and panel.dock.windowTitle() == "Per-sample"
    assert not panel.dock.isVisible()  # View → Per-sample shows it
    panel.dock.toggleViewAction().trigger()
    panel.dock.raise_()
    assert panel.dock.isVisible()
    panel.toggle.setChecked(True)
    qtbot.waitUntil(lambda: panel.observer is not None, timeout=TIMEOUT_MS)
    assert "(model) (TinyTransformer)" in panel.status.text()  # a bare parameter
    assert "self_attn" not in panel.status.text()  # nn.MultiheadAttention has figures
    window.controller.run(2)
    qtbot.waitUntil(lambda: panel.shown_step == 2 or (panel.refresh() or False),
                    timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    step, figures = panel.observer.last
    assert step == 2 and figures.samples == 8
    counts, _ = np.histogram(figures.norms, figures.histogram()[0])
    np.testing.assert_array_equal(panel.shown_counts(), counts)
    rows = [panel.top.topLevelItem(i) for i in range(panel.top.topLevelItemCount())]
    order = np.argsort(-figures.norms)
    assert [int(r.text(1)) for r in rows] == order.tolist()
    assert float(rows[0].text(2)) == float(f"{figures.norms[order[0]]:.4g}")
    assert panel.status.text().startswith(f"step 2 (batch make_batch(1)): per-sample grad norm "
                                          f"over 8 samples: median {np.median(figures.norms):.4g}")
    window.grab().save(str(tmp_path / "per_sample.png"))
    panel.toggle.setChecked(False)  # off: a job takes the observer off the session
    qtbot.waitUntil(lambda: panel.observer is None, timeout=TIMEOUT_MS)
    assert not any(type(o).__name__ == "PerSampleObserver"
                   for o in window.controller.session.live.session.observers)
