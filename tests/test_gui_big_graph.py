"""Big graphs: a readable first view, search into collapsed modules, tooltips, the minimap."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPointF, Qt

from gradexplorer.core.graph.collapse import module_node_id
from gradexplorer.gui.graph.drawing import KIND_CODES
from tests.gui_helpers import TIMEOUT_MS, open_model, wait_idle

BIG = "example:deep:blocks=120"  # about 720 operations: over the readable limit


def test_a_big_graph_opens_collapsed_and_a_small_one_whole(qtbot, make_window):
    window = make_window()
    panel = window.graph_panel
    open_model(qtbot, window, BIG)
    assert panel.detail_depth() == 1
    assert len(panel.graph) > 700 and len(panel.drawing) < 10
    assert module_node_id("blocks") in panel.drawing.index
    open_model(qtbot, window, "example:digits")
    assert panel.detail_depth() is None  # small graphs show every operation
    assert len(panel.drawing) == len(panel.graph)


def test_search_reaches_into_collapsed_modules_and_opens_them(qtbot, make_window):
    window = make_window()
    panel = window.graph_panel
    open_model(qtbot, window, BIG)
    panel.search_edit.setText("blocks.7.fc.weight")
    assert panel.match_label.text().strip().startswith("1 found")
    folded = panel.drawing.index[module_node_id("blocks")]
    assert panel.view.canvas.matches.tolist() == [folded]  # the module that holds the hit
    qtbot.keyClick(panel.search_edit, Qt.Key_Return)
    qtbot.waitUntil(lambda: "blocks.7.fc.weight" in panel.drawing.params, timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    hit = panel.drawing.params.index("blocks.7.fc.weight")
    assert window.selection.current.param == "blocks.7.fc.weight"
    assert panel.selected_nodes().tolist() == [hit]
    assert module_node_id("blocks.6") in panel.drawing.index  # only the way to the hit opened
    assert module_node_id("blocks.7") not in panel.drawing.index


def test_nodes_show_their_full_names_on_hover(qtbot, make_window):
    window = make_window()
    panel = window.graph_panel
    open_model(qtbot, window, BIG)
    index = panel.drawing.index[module_node_id("blocks")]
    panel.view.zoom_to([index])
    pos = panel.view.mapFromScene(QPointF(*panel.drawing.xy[index].tolist()))
    assert panel.view.tooltip_at(pos).splitlines()[:2] == ["blocks", "720 nodes collapsed"]
    assert panel.view.tooltip_at(pos + type(pos)(0, 4000)) == ""


def test_the_minimap_shows_when_zoomed_in_and_moves_the_view(qtbot, make_window):
    window = make_window()
    panel = window.graph_panel
    open_model(qtbot, window, "example:deep:blocks=30")
    minimap, view = panel.view.minimap, panel.view
    view.fit()
    assert not minimap.isVisible()
    view.zoom(8.0)
    assert minimap.isVisible()
    top = minimap.scene_point(minimap.width() / 2, 2)
    qtbot.mouseClick(minimap, Qt.LeftButton, pos=minimap.rect().center().__class__(minimap.width() // 2, 2))
    centre = view.mapToScene(view.viewport().rect().center())
    assert abs(centre.y() - top.y()) < minimap.visible_scene_rect().height()
    assert minimap.visible_scene_rect().top() <= panel.drawing.bounds()[1] + 1


def test_explanations_are_made_on_hover_never_written_into_the_graph(qtbot, make_window):
    """Tracing does not explain; a hover explains and keeps it in the view, not in the node
    dicts the layout thread reads."""
    from gradexplorer.core.diagnose.explain import explain_node

    window = make_window()
    panel = window.graph_panel
    open_model(qtbot, window)  # digits: every operation shown
    graph = panel.drawing.graph
    assert not any("explanation" in attrs for _, attrs in graph.nodes(data=True))  # none traced
    node = next(n for n, a in graph.nodes(data=True) if a.get("kind") == "op")
    index = panel.drawing.index[node]
    panel.view.zoom_to([index])
    pos = panel.view.mapFromScene(QPointF(*panel.drawing.xy[index].tolist()))
    tip = panel.view.tooltip_at(pos)
    assert explain_node(graph, node) in tip
    assert not any("explanation" in attrs for _, attrs in graph.nodes(data=True))
    assert panel.view.tooltip_at(pos) == tip  # the kept one
    assert window.tree.topLevelItemCount() == 1 and window.table.table.rowCount() > 0


def test_a_tall_graph_opens_readable_at_its_top(qtbot, make_window):
    """ResNet-18 in a 1024×700 window: its residual blocks (a chain of 65 operations folded),
    at a scale where labels are drawn, the loss in view and the minimap showing the rest;
    Ctrl+0 (fit) still shows the whole graph."""
    from gradexplorer.gui.graph.view import READABLE_SCALE

    window = make_window()
    window.resize(1024, 700)
    panel = window.graph_panel
    open_model(qtbot, window, "example:resnet18", batch_size=2)
    view = panel.view
    assert panel.detail_depth() is not None and module_node_id("layer4.1") in panel.drawing.index
    assert view.scale_factor >= READABLE_SCALE
    loss = int(np.flatnonzero(panel.drawing.kinds == KIND_CODES.index("loss"))[0])
    shown = view.mapToScene(view.viewport().rect()).boundingRect()
    assert shown.contains(QPointF(*panel.drawing.xy[loss].tolist()))
    assert view.minimap.isVisible()
    side = min(view.contentsRect().width(), view.contentsRect().height())
    assert max(view.minimap.width(), view.minimap.height()) <= 0.28 * side + 1
    assert not view.minimap.geometry().intersects(view.viewport().geometry())  # not over the graph
    view.fit()
    shown = view.mapToScene(view.viewport().rect()).boundingRect()
    assert shown.contains(view.canvas.boundingRect().adjusted(10, 10, -10, -10))
