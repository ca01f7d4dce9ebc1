"""The app follows a run directory written by watch: the same views, updated as the run grows."""

from __future__ import annotations

import gradexplorer as gx
from tests.gui_helpers import TIMEOUT_MS
from tests.screenshot_helpers import image_pixels, run_gradexplorer
from tests.watched_loop import make, train


def test_window_follows_a_growing_run(qtbot, make_window, tmp_path):
    model, opt = make()
    rec = gx.watch(model, opt, tmp_path / "run", bins=16)
    train(model, opt, 3)
    window = make_window()
    follower = window.file_actions.open_run(str(tmp_path / "run"))
    assert follower is not None
    run = gx.open_run(tmp_path / "run")
    timeline = window.controller.timeline
    assert timeline.latest_gradients.step == 3 and timeline.latest.step == 3
    assert [r[0] for r in window.table.table.rows] == [n for n, _ in model.named_parameters()]
    norm = run.figures(3)["0.weight"]["norm"]
    assert window.table.table.stats["0.weight"].norm == norm
    assert window.tree.topLevelItem(0).text(1) == "Sequential"
    qtbot.waitUntil(lambda: window.graph_panel.drawing is not None, timeout=TIMEOUT_MS)
    assert {d.get("param") for _, d in window.graph_panel.graph.nodes(data=True)} >= {"0.weight"}
    edges, counts = run.histogram(3, "0.weight")
    current, _ = timeline.histograms_of("0.weight")
    assert (current.edges == edges).all() and (current.counts == counts).all()

    train(model, opt, 2, start=3)  # the run grows while the window shows it
    qtbot.waitUntil(lambda: timeline.latest is not None and timeline.latest.step == 5,
                    timeout=TIMEOUT_MS)
    window.settle()
    assert timeline.gradients.steps() == [1, 2, 3, 4, 5]  # every step once, in order
    assert list(timeline.norm.x) == [1, 2, 3, 4, 5]
    assert window.table.table.stats["2.bias"].norm == run.figures(5)["2.bias"]["norm"]
    matrix = timeline.gradients.histogram_matrix("0.weight")
    assert list(matrix.steps) == [1, 2, 3, 4, 5]
    rec.close()


def test_open_command_shows_a_run_and_refuses_a_bad_one(qapp, tmp_path):
    model, opt = make()
    with gx.watch(model, opt, tmp_path / "run"):
        train(model, opt, 4)
    shot = tmp_path / "run.png"
    done = run_gradexplorer("open", str(tmp_path / "run"), "--screenshot", str(shot), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    pixels = image_pixels(shot)
    assert pixels.shape[0] > 400 and len(set(pixels[::7, ::7].ravel().tolist())) > 20
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "run.sqlite").write_bytes(b"not a database")
    done = run_gradexplorer("open", str(tmp_path / "bad"), cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
