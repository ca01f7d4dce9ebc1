"""The graph cache (issue 22 item 10): the app's first graph drawn from the last open's drawing
while the model loads, replaced by the live trace; the shipped default example's entry equals a
live trace and layout with the installed torch (regenerate it with
``python -m gradexplorer.gui.graph.graph_cache`` when this fails)."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from gradexplorer.core.model.options import DEFAULT_SPEC, ModelOptions
from gradexplorer.core.session.config import SessionConfig
from gradexplorer.gui.graph.graph_cache import (
    cache_key,
    cached_drawing,
    drawing_entry,
    entry_file,
    find_entry,
    live_first_view,
    write_entry,
)
from gradexplorer.gui.models.graph_view import DEFAULT_LAYOUT
from gradexplorer.gui.models.session import LOADING
from tests.gui_helpers import TIMEOUT_MS, wait_idle


def default_key(spec: str = DEFAULT_SPEC) -> dict:
    return cache_key(spec, ModelOptions(), DEFAULT_LAYOUT, True)


def test_the_shipped_default_example_entry_is_a_live_trace_and_layout_with_this_torch():
    shipped = find_entry(None, default_key())  # no user cache: the package's entry
    assert shipped is not None, "the shipped entry's key no longer matches the default example"
    live = drawing_entry(live_first_view(DEFAULT_SPEC))
    assert len(live["ids"]) > 10
    assert shipped == live, "regenerate it: python -m gradexplorer.gui.graph.graph_cache"


def test_the_key_follows_the_model_source_and_a_damaged_entry_is_not_drawn(tmp_path):
    model = tmp_path / "net.py"
    model.write_text("def build():\n    return 1\n")
    key = default_key(f"{model}:build")
    assert key["source"] and key["torch"]  # torch's version, read without importing it
    model.write_text("def build():\n    return 2\n")
    assert default_key(f"{model}:build")["source"] != key["source"]
    assert default_key("torchvision.models:resnet18") is None  # no source known: not cached
    entry = find_entry(None, default_key())
    assert cached_drawing(entry) is not None
    for damage in ({"xy": entry["xy"][:-1]}, {"edges": [[0, 10_000]]}, {"kinds": None}):
        assert cached_drawing({**entry, **damage}) is None
    (tmp_path / "bad.json").write_text("{not json")
    assert find_entry(tmp_path, {**key, "spec": "bad"}) is None


@pytest.fixture
def gated_build(monkeypatch):
    """The model's build waits for ``release`` (as torch's import and the build take seconds
    at a real start): what the window shows meanwhile can be checked."""
    from gradexplorer.gui.training import live_session

    release = threading.Event()
    build = live_session.build_session

    def waiting(*args, **kwargs):
        release.wait(TIMEOUT_MS / 1000)
        return build(*args, **kwargs)

    monkeypatch.setattr(live_session, "build_session", waiting)
    return release


@pytest.fixture
def cache_home(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    from gradexplorer.gui.window.cached_first_graph import cache_folder

    return cache_folder()


def start(make_window, spec: str = DEFAULT_SPEC):
    """The app's start (``app.launch``) on ``spec``: the cached graph, then the model opened
    (default options: the cached tooltips name the default batch's shapes)."""
    from gradexplorer.gui.window.cached_first_graph import CachedFirstGraph

    window = make_window()
    cached = CachedFirstGraph(window, spec, ModelOptions())
    window.open_model(spec, ModelOptions(), SessionConfig(device="cpu"))
    cached.watch()
    return window, cached


def test_the_cached_graph_is_drawn_while_the_model_loads_then_the_live_one_keeps_the_view(
        qtbot, make_window, gated_build, cache_home):
    key = default_key()
    shipped = find_entry(None, key)
    write_entry(entry_file(cache_home, key), key, shipped)  # as a last open left it
    window, cached = start(make_window)
    panel = window.graph_panel
    panel.view.viewport().repaint()
    image = panel.view.viewport().grab().toImage()
    colours = {image.pixel(x, y) for x in range(0, image.width(), 7) for y in range(0, image.height(), 7)}
    assert panel.cached is not None and panel.drawing is panel.cached and panel.graph is None
    assert len(colours) > 3  # nodes, edges and labels painted, not an empty view
    assert panel.live_drawing is None and window.controller.session.live is None
    assert window.controller.session.state == LOADING and not window.run_controls.step_action.isEnabled()
    assert "loading" in window.statusBar().currentMessage() and "loading" in panel.busy_label.text()
    # a click on the cached graph selects; its hook menu waits for the model
    index = panel.drawing.params.index("fc1.weight")
    panel._clicked(index)
    menus = []
    panel.hook_menu_requested.connect(lambda *a: menus.append(a))
    panel._context(index, panel.view.mapToGlobal(panel.view.rect().center()))
    assert menus == [] and window.selection.current.param == "fc1.weight"
    assert panel.view.tooltip_at(panel.view.mapFromScene(*panel.drawing.xy[index])).startswith("fc1.weight")
    panel.view.zoom(1.5)
    panel.view.user_moved()
    transform, ids = panel.view.transform(), list(panel.drawing.ids)
    gated_build.set()
    qtbot.waitUntil(lambda: panel.live_drawing is not None, timeout=TIMEOUT_MS)
    assert panel.graph is not None and panel.cached is None and list(panel.drawing.ids) == ids
    assert drawing_entry(panel.drawing) == shipped  # the live drawing is the one that was cached
    assert panel.view.transform() == transform  # the view kept: zoom and scroll
    assert panel.drawing.ids[int(panel.selected_nodes()[0])] == ids[index]  # and the selection
    wait_idle(qtbot, window)
    assert window.controller.session.live is not None and window.run_controls.step_action.isEnabled()
    assert cached.writer is None  # the cache was right: nothing rewritten


def test_a_cached_graph_that_differs_is_replaced_and_the_cache_refreshed(
        qtbot, make_window, gated_build, cache_home):
    key = default_key()
    stale = dict(find_entry(None, key))  # as another torch might have traced it: a node less
    keep = list(range(len(stale["ids"]) - 1))
    stale.update({name: [stale[name][i] for i in keep] for name in
                  ("ids", "kinds", "labels", "tips", "modules", "params", "xy")})
    stale["edges"] = [e for e in stale["edges"] if max(e) < len(keep)]
    path = entry_file(cache_home, key)
    write_entry(path, key, stale)
    window, cached = start(make_window)
    panel = window.graph_panel
    assert len(panel.drawing) == len(keep)
    gated_build.set()
    qtbot.waitUntil(lambda: panel.live_drawing is not None, timeout=TIMEOUT_MS)
    assert len(panel.drawing) == len(keep) + 1
    cached.writer.join(TIMEOUT_MS / 1000)
    stored = json.loads(path.read_text())
    assert stored["key"] == key and stored["drawing"] == drawing_entry(panel.drawing)
    assert np.allclose(cached_drawing(stored["drawing"]).xy, panel.drawing.xy, atol=1e-3)
    wait_idle(qtbot, window)


def test_a_cached_graph_whose_model_fails_to_open_goes(qtbot, make_window, cache_home, tmp_path):
    model = tmp_path / "broken.py"
    model.write_text("def build():\n    raise ValueError('this model does not build')\n")
    spec = f"{model}:build"
    key = default_key(spec)
    write_entry(entry_file(cache_home, key), key, find_entry(None, default_key()))
    window, _cached = start(make_window, spec)
    window.scripted = True  # the error to stderr, not a dialog
    assert window.graph_panel.cached is not None
    qtbot.waitUntil(lambda: window.graph_panel.drawing is None, timeout=TIMEOUT_MS)
    assert window.graph_panel.cached is None and window.controller.session.live is None


def test_the_users_cache_keeps_only_the_newest_entries(tmp_path):
    """Each edit of a model file makes a new entry: the folder keeps the newest KEEP_ENTRIES."""
    import os

    from gradexplorer.gui.graph.graph_cache import KEEP_ENTRIES

    entry = find_entry(None, default_key())
    for i in range(KEEP_ENTRIES + 5):
        key = {**default_key(), "source": f"edit {i}"}
        assert write_entry(entry_file(tmp_path, key), key, entry)
        os.utime(entry_file(tmp_path, key), (1000 + i, 1000 + i))  # written in this order
    left = sorted(tmp_path.glob("*.json"))
    assert len(left) == KEEP_ENTRIES
    newest = {**default_key(), "source": f"edit {KEEP_ENTRIES + 4}"}
    assert find_entry(tmp_path, newest) == entry
    assert not entry_file(tmp_path, {**default_key(), "source": "edit 0"}).exists()
