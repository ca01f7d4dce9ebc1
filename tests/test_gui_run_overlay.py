"""Many runs in one window: N run directories (and the live session) overlaid in distinct
colours with a legend and a selector, always on shared scales; the curves' x axis by step,
relative time or wall time from the times the run directory stores."""

from __future__ import annotations

import sqlite3

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtCore import Qt

from gradexplorer.core.stats.bands import distribution_bands
from gradexplorer.gui.models.run_overlay import PALETTE, x_positions
from tests.gui_helpers import open_model, wait_idle
from tests.screenshot_helpers import run_gradexplorer
from tests.share_helpers import write_run


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory):
    """Three real MLP runs under watch, different learning rates and seeds."""
    folder = tmp_path_factory.mktemp("runs")
    return [write_run(folder / name, steps=steps, lr=lr, seed=seed)
            for name, steps, lr, seed in (("a", 8, 0.1, 0), ("b", 14, 0.5, 1), ("c", 6, 0.02, 2))]


def stored(path, column: str) -> tuple[np.ndarray, np.ndarray]:
    """(steps, column) as the run directory stores them, read with sqlite3 directly."""
    with sqlite3.connect(path / "run.sqlite") as db:
        rows = db.execute(f"SELECT step, {column} FROM steps ORDER BY step").fetchall()
    return np.array([r[0] for r in rows], float), np.array([r[1] for r in rows], float)


def data(item) -> tuple[np.ndarray, np.ndarray]:
    """Every point given to a curve (``getData`` is what is drawn: clipped to the view)."""
    return item.xData, item.yData


def padded(values: list[np.ndarray]) -> tuple[float, float]:
    """The y range a plot shows for these values (5% padding, as the curves fit)."""
    both = np.concatenate(values)
    lo, hi = float(both.min()), float(both.max())
    pad = (hi - lo) * 0.05
    return lo - pad, hi + pad


@pytest.fixture
def window(make_window, three_runs):
    window = make_window()
    window.resize(1400, 900)
    assert window.file_actions.open_run(str(three_runs[0])) is not None
    for path in three_runs[1:]:
        assert window.run_compare.add_run(path) is not None
    window.selection.select(param="0.weight", module="0", source="test")
    window.settle()
    window.curves.refresh()
    window.run_compare.runs_panel.refresh()
    return window


def test_three_runs_are_three_coloured_curves_on_one_scale(window, three_runs):
    curves = window.curves
    assert curves.loss_lines.names() == ["a", "b", "c"]  # the legend
    assert window.run_compare.runs_dock.isVisible()
    items = [curves.loss_item, *curves.loss_lines.items[:2]]
    colours = [item.opts["pen"].color().name() for item in items]
    assert colours == list(PALETTE[:3]) and len(set(colours)) == 3
    losses = [stored(path, "loss") for path in three_runs]
    for item, (steps, loss) in zip(items, losses, strict=True):
        x, y = data(item)
        assert x.tolist() == steps.tolist() and np.allclose(y, loss)
    (x0, x1), (y0, y1) = curves.loss_plot.vb.viewRange()
    assert x0 <= 1 and x1 >= 14  # the longest run (b) fits
    assert (y0, y1) == pytest.approx(padded([loss for _, loss in losses]))
    # the per-parameter figure: 0.weight's norm in every run, as each run stored it
    lines = window.run_compare.runs_panel.lines
    assert lines.names() == ["b", "c", "a"]  # the reference (a) drawn last, on top
    for item, path in zip(lines.items, [three_runs[1], three_runs[2], three_runs[0]], strict=True):
        with sqlite3.connect(path / "run.sqlite") as db:
            norms = [r[0] for r in db.execute("SELECT norm FROM stats WHERE name = '0.weight' "
                                              "ORDER BY step")]
        assert data(item)[1].tolist() == norms
    # the bands: the reference in full, the others' medians from their own histograms
    medians = window.distributions.other_bands.medians
    assert list(medians) == ["b", "c"]
    history = window.overlay.runs[1].source.history
    matrix = history.histogram_matrix("0.weight", history.run.steps)
    assert medians["b"].tolist() == distribution_bands(matrix.edges, matrix.counts)["median"].tolist()


def test_hiding_a_run_in_the_selector_removes_it_and_rescales(window, three_runs):
    selector = window.run_compare.runs_panel.selector
    assert selector.table.rowCount() == 3
    selector.set_shown(1, False)  # as a click on run b's box does
    assert not window.overlay.runs[1].visible
    window.curves.refresh()
    curves = window.curves
    shown = [item for item in curves.loss_lines.items if item.isVisible()]
    assert len(shown) == 1 and curves.loss_lines.names() == ["a", "c"]
    loss_a, loss_c = stored(three_runs[0], "loss")[1], stored(three_runs[2], "loss")[1]
    assert curves.loss_plot.vb.viewRange()[1] == pytest.approx(padded([loss_a, loss_c]))
    assert curves.loss_plot.vb.viewRange()[0][1] < 14  # b's last steps no longer in view
    window.distributions.refresh_bands()
    assert list(window.distributions.other_bands.medians) == ["c"]
    selector.set_shown(1, True)
    window.curves.refresh()
    assert curves.loss_lines.names() == ["a", "b", "c"]


def test_the_reference_run_is_drawn_in_full_and_its_heat_map_shown(window, three_runs, qtbot):
    selector = window.run_compare.runs_panel.selector
    table = selector.table
    qtbot.mouseClick(table.viewport(), Qt.LeftButton, pos=table.visualItemRect(table.item(2, 1)).center())
    assert window.overlay.reference == 2
    assert [table.item(r, 1).text() for r in range(3)] == ["☆", "☆", "★ reference"]
    assert window.gradients.run_history.run.path == three_runs[2]
    window.gradients.refresh_heatmap()
    assert window.gradients.heatmap.shown[1].tolist() == [1, 2, 3, 4, 5, 6]  # c's steps
    window.distributions.refresh_bands()
    assert window.distributions.bands.steps.tolist() == [1, 2, 3, 4, 5, 6]  # c's bands in full
    assert list(window.distributions.other_bands.medians) == ["a", "b"]
    selector.table.selectRow(1)
    selector.remove_button.click()  # b leaves the overlay; c stays the reference
    assert [r.name for r in window.overlay.runs] == ["a", "c"] and window.overlay.reference == 1


def test_x_axis_by_relative_and_wall_time_from_the_stored_times(window, three_runs):
    curves = window.curves
    curves.x_box.setCurrentText("relative")
    assert window.overlay.x_mode == "relative time"
    window.curves.refresh()
    for item, path in zip([curves.loss_item, *curves.loss_lines.items[:2]], three_runs, strict=True):
        _steps, times = stored(path, "time")
        assert np.allclose(data(item)[0], times - times[0], rtol=0, atol=1e-9)
    curves.x_box.setCurrentText("wall")
    window.curves.refresh()
    assert isinstance(curves.loss_plot.getAxis("bottom"), pg.DateAxisItem)
    for item, path in zip([curves.loss_item, *curves.loss_lines.items[:2]], three_runs, strict=True):
        assert data(item)[0].tolist() == stored(path, "time")[1].tolist()
    (x0, x1), _ = curves.loss_plot.vb.viewRange()
    times = np.concatenate([stored(p, "time")[1] for p in three_runs])
    assert x0 <= times.min() and x1 >= times.max()  # every run on the shared time axis
    window.run_compare.runs_panel.refresh()
    assert data(window.run_compare.runs_panel.lines.items[0])[0][0] > 1e9  # the figure follows: dates
    curves.x_box.setCurrentText("step")
    window.curves.refresh()
    assert not isinstance(curves.loss_plot.getAxis("bottom"), pg.DateAxisItem)
    assert data(curves.loss_item)[0].tolist() == stored(three_runs[0], "step")[0].tolist()


def test_x_positions_leave_unknown_times_as_gaps():
    steps, times = np.array([1, 2, 4]), np.array([100.0, 101.5, 104.0])
    assert x_positions(np.array([1, 2, 4]), (steps, times), "relative time").tolist() == [0, 1.5, 4]
    assert x_positions(np.array([2]), (steps, times), "wall time").tolist() == [101.5]
    assert np.isnan(x_positions(np.array([3]), (steps, times), "wall time")[0])
    with pytest.raises(ValueError):
        x_positions(steps, (steps, times), "epoch")


def test_a_run_overlaid_on_the_live_session(qtbot, make_window, three_runs):
    window = make_window()
    open_model(qtbot, window, "example:digits")
    window.controller.run(3)
    wait_idle(qtbot, window)
    window.run_compare.add_run(three_runs[0])
    window.curves.x_box.setCurrentText("relative")
    window.settle()
    window.curves.refresh()
    assert window.curves.loss_lines.names() == ["live: example:digits", "a"]
    x, _ = data(window.curves.loss_item)
    times = window.controller.timeline.times.y
    assert len(x) == 3 and x[0] == 0 and np.all(np.diff(x) > 0)  # the live steps' own clock
    assert x.tolist() == (times - times[0]).tolist()


def test_a_damaged_or_missing_run_is_one_dialog_line(window, tmp_path):
    errors = []
    window.show_error = errors.append
    assert window.run_compare.add_run(tmp_path / "nowhere") is None
    assert len(errors) == 1 and "\n" not in errors[0]
    assert len(window.overlay.runs) == 3


def test_open_with_several_runs_overlays_them(three_runs, tmp_path, run_cli):
    shot = tmp_path / "overlay.png"
    done = run_gradexplorer("open", *map(str, three_runs), "--select", "0.weight", "--x-axis",
                            "relative", "--heatmap-axis", "per-step", "--window-size", "1024x700",
                            "--screenshot", str(shot), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert shot.is_file()
    code, _out, err = run_cli("open", three_runs[0], tmp_path)  # tmp_path holds no run
    assert code == 2 and "is not a run directory" in err and "Traceback" not in err
    code, _out, err = run_cli("open", three_runs[0], three_runs[1], "--select", "nope.weight")
    assert code == 2 and "--select 'nope.weight'" in err


def test_gui_overlays_runs_on_the_live_session(three_runs, tmp_path, run_cli):
    shot = tmp_path / "live.png"
    done = run_gradexplorer("gui", "--model", "example:digits", "--batch-size", "16", "--steps", "2",
                            "--overlay", str(three_runs[0]), "--overlay", str(three_runs[2]),
                            "--x-axis", "relative", "--screenshot", str(shot), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert shot.is_file()
    code, _out, err = run_cli("gui", "--overlay", tmp_path, "--screenshot", tmp_path / "x.png")
    assert code == 2 and "--overlay" in err and "not a run directory" in err


def test_spike_markers_follow_the_time_axis(qtbot, make_window, tmp_path):
    """A run with a loss spike: its marker sits at the spike step's stored time."""
    from tests.spike_helpers import train

    path = tmp_path / "spiky"
    train(path, 60, inject=40)
    window = make_window()
    window.file_actions.open_run(str(path))
    window.settle()
    events = window.controller.timeline.ledger.events()
    assert events
    window.curves.x_box.setCurrentText("relative")
    window.settle()
    window.forensics.spike_markers.refresh()
    steps, times = stored(path, "time")
    want = [float(times[steps.tolist().index(e.step)] - times[0]) for e in events]
    assert window.forensics.spike_markers.items["loss"].getData()[0].tolist() == pytest.approx(want)


def test_the_curves_csv_holds_every_run_shown(window, three_runs, tmp_path, monkeypatch):
    import pandas as pd
    from PySide6.QtWidgets import QFileDialog

    target = tmp_path / "curves.csv"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(target), ""))
    window.overlay.set_visible(1, False)  # run b hidden: not in the file
    window.curves.csv_button.click()
    table = pd.read_csv(target)
    assert list(table.columns) == ["run", "step", "loss", "global_norm"]
    assert sorted(set(table["run"])) == ["a", "c"]
    for name, path in (("a", three_runs[0]), ("c", three_runs[2])):
        rows = table[table["run"] == name]
        steps, losses = stored(path, "loss")
        _, norms = stored(path, "global_norm")
        assert rows["step"].tolist() == steps.astype(int).tolist()
        assert rows["loss"].tolist() == losses.tolist() and rows["global_norm"].tolist() == norms.tolist()
