"""Snapshots from the app: export now and every K steps, browse one, compare two, `open`."""

from __future__ import annotations

import numpy as np

from gradexplorer.core.snapshot import read_snapshot
from tests.gui_helpers import TIMEOUT_MS, export, open_model, wait_idle
from tests.screenshot_helpers import image_pixels, run_gradexplorer


def test_blocked_run_exports_a_snapshot_that_opens_without_the_model(qtbot, make_window, tmp_path):
    window = make_window()
    open_model(qtbot, window)
    shown = []
    window.controller.session.error.disconnect(window.show_error)
    window.controller.session.error.connect(shown.append)
    window.controller.export_snapshot(str(tmp_path))  # nothing to export before a step
    qtbot.waitUntil(lambda: bool(shown), timeout=TIMEOUT_MS)
    assert "run at least one step" in shown[0]
    with qtbot.waitSignal(window.controller.session.hooks_changed, timeout=TIMEOUT_MS):
        window.controller.attach_hook("fc1", "block")
    window.controller.run(2)
    wait_idle(qtbot, window)
    path = export(qtbot, window, tmp_path / "snaps")
    snapshot = read_snapshot(path)
    assert snapshot.step == 2
    assert snapshot.gradient_names() == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert snapshot.manifest["hooks"][0]["module"] == "fc1"
    assert snapshot.manifest["hooks"][0]["action"] == "block"
    viewer = window.file_actions.open_snapshot(str(path))
    qtbot.addWidget(viewer)
    table = viewer.table
    assert table.rowCount() == 8
    assert table.item(0, 0).text() == "conv1.weight" and table.item(0, 2).text() == "no grad"
    assert "no gradient" in viewer.histogram.note.toPlainText()
    table.selectRow(4)  # fc1.weight
    drawn = viewer.histogram.current_item.getData()[1]
    counts = np.round(10 ** drawn - 1) if viewer.histogram.auto_shown else drawn  # auto log counts
    assert counts.sum() == 64 * 512


def test_export_every_k_steps_and_compare(qtbot, make_window, tmp_path, monkeypatch):
    from gradexplorer.gui.snapshots.snapshot_window import SnapshotWindow

    window = make_window()
    open_model(qtbot, window)
    folder = tmp_path / "snaps"
    window.controller.export_every(str(folder), 2)
    window.controller.run(4)
    wait_idle(qtbot, window)
    assert sorted(p.name for p in folder.iterdir()) == ["step-000002", "step-000004"]
    assert any("snapshot" in window.events.item(i).text() for i in range(window.events.count()))
    window.controller.export_every(None)
    window.controller.run(2)
    wait_idle(qtbot, window)
    assert len(list(folder.iterdir())) == 2  # stopped
    viewer = SnapshotWindow(folder / "step-000002", folder / "step-000004")
    qtbot.addWidget(viewer)
    names = [viewer.table.item(r, 0).text() for r in range(viewer.table.rowCount())]
    assert names[:8] == [n for n, _ in window.controller.session.live.session.model.named_parameters()]
    assert names[8] == "(all gradients)"
    cosine = float(viewer.table.item(0, 4).text())
    assert -1.0 <= cosine <= 1.0
    assert "B over A" in viewer.histogram.plotItem.titleLabel.text
    assert viewer.flow.shown == viewer.flow_b.shown == names[:8]  # both snapshots' flow
    a_peaks = viewer.flow.peak_bars.opts["width"]
    b_peaks = viewer.flow_b.peak_bars.opts["width"]
    assert len(a_peaks) == len(b_peaks) == 8 and list(a_peaks) != list(b_peaks)
    # on a real screen smaller than its 1200×760, the window opens within it
    monkeypatch.setattr("gradexplorer.gui.window.window_fit.screen_is_real", lambda: True)
    small = SnapshotWindow(folder / "step-000002", folder / "step-000004")
    qtbot.addWidget(small)
    screen = small.screen().availableGeometry()
    assert screen.width() < 1200 and small.width() <= screen.width() and small.height() <= screen.height()


def test_open_command_refuses_a_foreign_folder(run_cli, tmp_path):
    code, _, err = run_cli("open", str(tmp_path))
    assert code == 2 and err.startswith("gradexplorer: error:") and len(err.strip().splitlines()) == 1


def test_open_command_screenshot(tmp_path):
    done = run_gradexplorer("run", "--steps", "2", "--batch-size", "8", "--export", "snaps",
                            cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    snapshot = next((tmp_path / "snaps").iterdir())
    done = run_gradexplorer("open", str(snapshot), "--screenshot", "open.png", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert len(set(image_pixels(tmp_path / "open.png").ravel().tolist())) > 50


def test_every_plot_saves_as_png_and_svg(qtbot, make_window, tmp_path):
    """File → Save plot image: each plot as a PNG of its size and as an SVG drawing with its
    curves and labels (pyqtgraph's own SVG exporter raised a ValueError here)."""
    import xml.etree.ElementTree as ET

    window = make_window()
    open_model(qtbot, window)
    window.controller.run(2)
    wait_idle(qtbot, window)
    errors = []
    window.controller.session.error.connect(errors.append)
    for label, plot in window.file_actions.plots().items():
        for suffix in (".png", ".svg"):
            path = tmp_path / (label.replace(" ", "-") + suffix)
            window.file_actions.save_plot(plot, label, path)
            assert path.is_file() and path.stat().st_size > 1000, path
        pixels = image_pixels(tmp_path / (label.replace(" ", "-") + ".png"))
        assert pixels.shape[0] > 50 and pixels.shape[1] > 50
        tree = ET.parse(tmp_path / (label.replace(" ", "-") + ".svg"))
        drawn = [e for e in tree.iter() if e.tag.endswith(("path", "polyline", "text", "image"))]
        assert len(drawn) > 10, label
    assert errors == []
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
