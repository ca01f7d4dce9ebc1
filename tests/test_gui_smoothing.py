"""The training curves' smoothing slider: TensorBoard's 0–0.999 weight, the core's EMA."""

import numpy as np

from gradexplorer.core.stats.curves import ema_smooth
from gradexplorer.gui.models.timeline import StepPoint, TimelineModel
from gradexplorer.gui.plots.curves import TrainingCurves


def test_the_slider_sets_the_smoothing_weight(qtbot):
    timeline = TimelineModel()
    curves = TrainingCurves(timeline)
    qtbot.addWidget(curves)
    curves.resize(800, 300)
    curves.show()
    rng = np.random.default_rng(1)
    losses = list(2.0 + np.cumsum(rng.normal(size=50)) * 0.1)
    timeline.extend([StepPoint(i + 1, v, abs(v), 0.01) for i, v in enumerate(losses)], 10.0)
    curves.refresh()
    assert curves.smooth_slider.isVisible() and curves.smoothing == 0.9
    assert not curves.smooth_box.isChecked()
    curves.smooth_slider.setValue(600)  # moving the slider turns smoothing on
    assert curves.smooth_box.isChecked() and curves.smooth_label.text() == "0.600"
    _, shown = curves.loss_item.getData()
    assert np.array_equal(shown, ema_smooth(losses, 0.6))
    curves.smooth_slider.setValue(999)
    _, shown = curves.loss_item.getData()
    assert np.array_equal(shown, ema_smooth(losses, 0.999))
    assert np.ptp(shown) < np.ptp(losses)
    curves.smooth_slider.setValue(0)  # weight 0: the raw curve itself
    assert np.array_equal(curves.loss_item.getData()[1], losses)


def test_csv_of_the_curves_and_of_the_grid(qtbot, tmp_path, monkeypatch):
    import csv

    from PySide6.QtWidgets import QFileDialog

    from gradexplorer.core.stats.records import STAT_FIELDS
    from gradexplorer.gui.models.selection import SelectionModel
    from gradexplorer.gui.plots.distributions_dock import DistributionsPanel
    from tests.share_helpers import recorded_history

    timeline = TimelineModel()
    curves = TrainingCurves(timeline)
    qtbot.addWidget(curves)
    points = [StepPoint(i + 1, 1 / (i + 3), 0.1 * i if i != 2 else float("nan"), 0.01) for i in range(6)]
    timeline.extend(points, 10.0)
    target = tmp_path / "curves.csv"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(target), ""))
    curves.csv_button.click()
    with target.open() as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["step", "loss", "global_norm"]
    assert [(int(r[0]), float(r[1])) for r in rows[1:]] == [(p.step, p.loss) for p in points]  # exact
    assert rows[3][2] == "nan" and float(rows[2][2]) == 0.1

    timeline.reset(recorded_history())
    panel = DistributionsPanel(SelectionModel(), timeline)
    qtbot.addWidget(panel)
    panel.grid.ranking.setCurrentText("largest norm")
    panel.grid.filter.setText("weight")
    target = tmp_path / "grid.csv"
    panel.grid.csv_button.click()
    with target.open() as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["step", "parameter", *STAT_FIELDS]
    assert [r[1] for r in rows[1:]] == panel.grid.model.names  # as on screen: filtered, ranked
    latest = timeline.latest_gradients
    for r in rows[1:]:
        want = latest.params[r[1]].whole("norm")  # NaN for 3.weight's NaN gradient, never its finite part
        assert int(r[0]) == latest.step and r[2] == float.__repr__(want)
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: ("", ""))
    assert panel.grid.save_csv() is None  # cancelled: nothing written
