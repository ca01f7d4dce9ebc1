"""The long-run benchmark's fast writer makes a valid run: ``open_run`` takes it, its copied
steps read as the steps the recorder's writer wrote, shifted."""

import numpy as np

import gradexplorer as gx
from gradexplorer.core.runs.history import RunHistory
from tests.script_helpers import load_script


def test_a_synthesised_long_run_is_a_run(tmp_path):
    synth = load_script("bench", "long_run_synth.py")
    path = synth.synth_run(tmp_path / "long", 250, params=4, hist_every=10, bins=8)
    with gx.open_run(path) as run:
        run.check(last=3)
        assert run.steps == list(range(1, 251)) and len(run.parameters) == 4
        history = RunHistory(run)
        assert history.histogram_steps() == list(range(10, 251, 10))
        # step 137 is step 37 copied: the same figures, its wall time one second later
        assert run.figures(137) == run.figures(37) and run.figures(37)["layers.0.bias"]["nan_count"] == 2
        h137, h37 = run.histograms(140), run.histograms(40)
        assert all(np.array_equal(h137[n].counts, h37[n].counts) for n in run.parameters)
        assert history.flagged_steps()[153] == ["skipped"] and run.step_ledger(171).clipped
        steps, times, _ = history.step_figures()
        assert times[136] - times[36] == 1.0
    assert synth.synth_run(path, 250) == path  # kept, not written again
