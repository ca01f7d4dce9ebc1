"""The training curves' smoothing slider: TensorBoard's 0–0.999 weight, the core's EMA."""

import numpy as np

from gradexplorer.core.stats.curves import ema_smooth
from gradexplorer.gui.curves import TrainingCurves
from gradexplorer.gui.models.timeline import StepPoint, TimelineModel


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
