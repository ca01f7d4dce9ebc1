"""One membership rule: a module without direct parameters shows the same parameters everywhere."""

from __future__ import annotations

import numpy as np

from gradexplorer import TrainingSession, load_workload
from gradexplorer.core.graph.collapse import collapse_by_module, module_members
from gradexplorer.core.graph.layout.positions import layout_graph
from gradexplorer.core.model.membership import in_module, module_parameters
from gradexplorer.graph import trace_backward_graph
from gradexplorer.gui.graph.drawing import GraphDrawing
from gradexplorer.gui.graph.tint import params_behind
from gradexplorer.gui.models.selection import Selection, parameter_for
from gradexplorer.session import SessionConfig


def test_in_module():
    assert in_module("blocks.0.fc1", "blocks.0") and in_module("blocks.0", "blocks.0")
    assert not in_module("blocks.01", "blocks.0") and not in_module("blocks", "blocks.0")
    assert in_module("anything", "") and in_module("", "")


def test_a_module_without_direct_parameters_lists_the_same_parameters_in_every_view(qtbot):
    from gradexplorer.gui.models.selection import SelectionModel
    from gradexplorer.gui.panels.details_pane import DetailsPane

    session = TrainingSession(load_workload("example:deep:blocks=2"), SessionConfig(device="cpu"))
    model = session.model
    block = "blocks.0"
    assert not list(model.get_submodule(block).parameters(recurse=False))  # no direct parameters
    names = [n for n, _ in model.named_parameters()]
    expected = [n for n in names if n.startswith(block + ".")]  # an independent count
    assert module_parameters(names, block) == expected and len(expected) >= 2
    # the plots and the details pane show the block's first parameter
    assert parameter_for(Selection(module=block), model) == expected[0]
    selection = SelectionModel()
    details = DetailsPane(selection)
    qtbot.addWidget(details)
    details.set_context(model=model, stats={}, hooks={})
    selection.select(module=block)
    assert expected[0] in details.toPlainText()
    # the collapsed graph's module node is tinted by exactly those parameters
    graph = trace_backward_graph(session)
    collapsed = collapse_by_module(graph, depth=2)
    drawing = GraphDrawing(collapsed, layout_graph(collapsed, "layered"))
    node = next(i for i, (kind, module) in enumerate(zip(drawing.kinds, drawing.modules, strict=True))
                if module == block and kind == 4)  # KIND_CODES: module
    assert params_behind(drawing, names)[node] == expected
    # the op-level graph: the block's nodes are the same set for every helper that asks
    ops = GraphDrawing(graph, layout_graph(graph, "layered"))
    members = set(np.array(ops.nodes_of_module(block)).tolist())
    assert {ops.index[n] for n in module_members(graph, block)} <= members
    assert {p for i in members if (p := ops.params[i])} == set(expected)
