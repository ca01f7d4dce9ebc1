"""Several runs in one window: the Ledger, the Optimizer tab and the Distributions tiles show
the reference run's figures (saying which run), and every shown run's spike events are markers
on the curves, in its colour, named in their tooltips (issue 40, item 5)."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QPointF, Qt

import gradexplorer as gx
from tests.gui_helpers import TIMEOUT_MS
from tests.spike_helpers import train

SPIKE_A, SPIKE_B = 40, 50  # run a: 60 steps, run b: 56 steps (another batch blown up)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Two real spiky runs under watch: the same classifier, its side features blown up ×100
    at a different step each."""
    folder = tmp_path_factory.mktemp("reference")
    train(folder / "a", 60, inject=SPIKE_A)
    train(folder / "b", 56, inject=SPIKE_B)
    return folder / "a", folder / "b"


@pytest.fixture
def window(qtbot, make_window, two_runs):
    window = make_window()
    window.resize(1400, 900)
    assert window.file_actions.open_run(str(two_runs[0])) is not None
    timeline = window.controller.timeline
    qtbot.waitUntil(lambda: timeline.latest is not None and timeline.latest.step == 60,
                    timeout=TIMEOUT_MS)
    assert window.run_compare.add_run(two_runs[1]) is not None
    window.selection.select(param="side.weight", module="side", source="test")
    window.forensics.optimizer_dock.raise_()
    window.settle()
    return window


def redraw(window) -> None:
    window.settle()
    forensics = window.forensics
    forensics.ledger_panel.refresh()
    forensics.optimizer_curves.refresh()
    forensics.spike_markers.refresh()
    window.distributions.grid.refresh()


def shown_figures(window) -> dict:
    """What the Ledger, the Optimizer tab and the tiles show now."""
    forensics, grid = window.forensics, window.distributions.grid
    return {"ledger": forensics.ledger_panel.shown_ledger(),
            "ledger text": forensics.ledger_panel.details.text(),
            "applied curve": forensics.ledger_panel.applied.getData(),
            "momentum": forensics.optimizer_curves.curve.getData(),
            "optimizer note": forensics.optimizer_curves.readout.text(),
            "tile norms": {n: s.norm for n, s in grid.model.params.items()},
            "tile histograms": {n: h.counts.tolist() for n, h in grid.model.histograms.items()},
            "tile count": grid.count.text()}


def run_figures(path, name: str = "side.weight") -> dict:
    """The same figures as the run directory's Run reads them."""
    run = gx.open_run(path)
    last = run.last_step
    ledgers = run.ledger()
    return {"ledger": run.step_ledger(last),
            "applied": [led.grad_norm_applied for led in ledgers],
            "steps": run.steps,
            "momentum": [run.optimizer_state(s)[name].momentum_norm for s in run.steps],
            "tile norms": {n: s.norm for n, s in run.stats(last).items()},
            "tile histograms": {n: h.counts.tolist() for n, h in run.histograms(last).items()},
            "spikes": [e.step for e in run.spike_events()]}


def test_making_run_b_the_reference_shows_b_s_ledger_optimizer_and_tiles(window, two_runs, qtbot):
    a, b = run_figures(two_runs[0]), run_figures(two_runs[1])
    assert a["ledger"] != b["ledger"] and a["tile norms"] != b["tile norms"]  # two runs apart
    window.forensics.optimizer_curves.choose("momentum_norm")
    redraw(window)
    shown = shown_figures(window)
    assert shown["ledger"] == a["ledger"] and "run: a (the reference run)" in shown["ledger text"]
    assert shown["tile norms"] == a["tile norms"] and shown["tile count"].endswith("· a")
    selector = window.run_compare.runs_panel.selector
    table = selector.table
    qtbot.mouseClick(table.viewport(), Qt.LeftButton, pos=table.visualItemRect(table.item(1, 1)).center())
    assert window.overlay.reference == 1
    redraw(window)
    shown = shown_figures(window)
    assert shown["ledger"] == b["ledger"] and shown["ledger"].optimizer_step == 56
    assert shown["ledger text"].startswith("run: b (the reference run)")
    assert "optimizer step: 56" in shown["ledger text"]
    x, y = shown["applied curve"]
    assert x.tolist() == b["steps"] and y.tolist() == b["applied"]
    x, y = shown["momentum"]
    assert x.tolist() == b["steps"] and y.tolist() == b["momentum"]
    assert shown["optimizer note"].startswith("run b · after step 56")
    assert shown["tile norms"] == b["tile norms"]
    assert shown["tile histograms"] == b["tile histograms"]
    assert shown["tile count"].endswith("· b")
    window.overlay.set_reference(0)  # back to the window's own run
    redraw(window)
    shown = shown_figures(window)
    assert shown["ledger"] == a["ledger"] and shown["momentum"][1].tolist() == a["momentum"]
    assert shown["tile norms"] == a["tile norms"]


def click_marker(qtbot, window, item, step: int) -> None:
    """A real mouse click on the spike marker of ``item`` at ``step``."""
    spot = next(p for p in item.points() if p.pos().x() == step)
    where = window.curves.plots.mapFromScene(QPointF(item.mapToScene(spot.pos())))
    qtbot.mouseClick(window.curves.plots.viewport(), Qt.LeftButton, pos=QPoint(where.x(), where.y()))


def test_every_run_s_spikes_are_markers_in_its_colour(window, two_runs, qtbot):
    a, b = run_figures(two_runs[0]), run_figures(two_runs[1])
    assert a["spikes"] == [SPIKE_A] and b["spikes"] == [SPIKE_B]
    redraw(window)
    markers = window.forensics.spike_markers
    colours = [run.colour for run in window.overlay.runs]
    for key, curve in (("loss", "loss"), ("norm", "headline_norm")):
        for marks, run, want in ((markers.items, window.overlay.runs[0], a),
                                 (markers.others[0], window.overlay.runs[1], b)):
            item = marks[key]
            assert [p.pos().x() for p in item.points()] == want["spikes"]
            steps, values = run.source.figure(curve)
            assert [p.pos().y() for p in item.points()] == [values[steps.tolist().index(s)]
                                                            for s in want["spikes"]]
            assert [p.brush().color().name() for p in item.points()] == [run.colour]
            assert item.opts["tip"](x=0, y=0, data=item.points()[0].data()).startswith(f"run {run.name}: ")
    assert len(set(colours)) == 2
    click_marker(qtbot, window, markers.others[0]["loss"], SPIKE_B)  # b's spike: b is the reference
    qtbot.waitUntil(lambda: window.forensics.spike_panel.shown is not None, timeout=TIMEOUT_MS)
    assert window.overlay.reference == 1
    assert window.forensics.spike_panel.shown.step == SPIKE_B
    window.settle()
    ledger = window.forensics.ledger_panel
    assert ledger.pinned == SPIKE_B and ledger.shown_ledger() == gx.open_run(two_runs[1]).step_ledger(SPIKE_B)
    assert markers.lines[0].isVisible() and markers.lines[0].value() == SPIKE_B
    window.overlay.set_visible(1, False)  # b hidden: its markers go
    markers.refresh()
    assert not markers.others[0]["loss"].points().size
    assert [p.pos().x() for p in markers.items["loss"].points()] == [SPIKE_A]
    assert np.array_equal([p.brush().color().name() for p in markers.items["loss"].points()], [colours[0]])
