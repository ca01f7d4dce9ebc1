"""A run of many parameters and steps opens fast: the follower reads only the newest step
whole; the older steps' figures and histograms are read when a view asks for one parameter,
and every view still shows exactly what the run holds."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.core.runs.run import Run
from tests.gui_helpers import TIMEOUT_MS

STEPS = 12


def many_small(params: int) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(*(nn.Linear(2, 2) for _ in range(params // 2)))


def test_opening_a_long_run_reads_older_steps_only_as_views_ask(qtbot, make_window, tmp_path,
                                                                 monkeypatch):
    model = many_small(60)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gx.watch(model, opt, tmp_path / "run", bins=8):
        for step in range(STEPS):
            x = torch.randn(4, 2, generator=torch.Generator().manual_seed(step))
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
    whole_reads = []
    read_all = Run.histograms

    def counted(self, step, name=None):
        if name is None:
            whole_reads.append(step)
        return read_all(self, step, name)

    monkeypatch.setattr(Run, "histograms", counted)
    window = make_window()
    assert window.file_actions.open_run(str(tmp_path / "run")) is not None
    timeline = window.controller.timeline
    qtbot.waitUntil(lambda: timeline.latest is not None and timeline.latest.step == STEPS,
                    timeout=TIMEOUT_MS)
    window.settle()
    assert len(timeline.gradients) == STEPS
    assert set(whole_reads) == {STEPS}, f"steps read whole at open: {sorted(set(whole_reads))}"

    name = "3.weight"
    window.selection.select(param=name, module="3", source="test")
    window.settle()
    run = gx.open_run(tmp_path / "run")
    matrix = timeline.gradients.histogram_matrix(name)
    assert list(matrix.steps) == run.steps
    for row, step in enumerate(run.steps):
        edges, counts = run.histogram(step, name)
        np.testing.assert_array_equal(matrix.edges[row], edges)
        np.testing.assert_array_equal(matrix.counts[row], counts)
    steps, norms = timeline.gradients.series(name, "norm")
    assert list(steps) == run.steps
    assert list(norms) == [run.stats(s)[name].norm for s in run.steps]
    assert window.gradients.heatmap.has_data
    assert set(whole_reads) == {STEPS}  # one parameter over the steps: no step read whole
    run.close()
