"""Layouts of graphs with dense skip connections (DenseNet's concatenations) stay linear in
the graph's size: the long edges into one node share one chain of bend points."""

import numpy as np
import pytest

from gradexplorer.core.graph.extract import trace_backward_graph
from gradexplorer.core.graph.layout.layered import add_dummies, assign_layers
from gradexplorer.core.graph.layout.positions import graph_arrays, layered_drawing, layout_graph
from gradexplorer.core.model.spec import ModelOptions, load_workload
from gradexplorer.core.session.engine import SessionConfig, TrainingSession
from tests.script_helpers import load_script


@pytest.fixture(scope="module")
def densenet_graph():
    workload = load_workload("example:dense:size=8,batch=2", ModelOptions())
    return trace_backward_graph(TrainingSession(workload, SessionConfig(device="cpu")))


def test_long_edges_into_a_node_share_its_chain(densenet_graph):
    nodes, src, dst = graph_arrays(densenet_graph)
    n = len(nodes)
    layer, src, dst, _ = assign_layers(n, src, dst, [])
    full, psrc, pdst, (long, first, count) = add_dummies(n, layer, src, dst)
    one_per_edge = int((layer[dst[long]] - layer[src[long]] - 1).sum())
    dummies = len(full) - n
    # each lower end has one chain, as long as its farthest long edge needs
    assert dummies == sum(int(layer[v] - layer[src[long][dst[long] == v]].min() - 1)
                          for v in np.unique(dst[long]))
    assert dummies * 5 < one_per_edge  # DenseNet-121's blocks: ~6× fewer bend points
    assert dummies < 3 * (n + len(src))
    # every long edge still runs down one layer a hop, from its upper end into its lower end
    hops = set(zip(psrc.tolist(), pdst.tolist(), strict=True))
    for e, f, k in zip(long.tolist(), first.tolist(), count.tolist(), strict=True):
        path = [int(src[e]), *range(f, f + k), int(dst[e])]
        assert [int(full[p]) for p in path] == list(range(int(layer[src[e]]), int(layer[dst[e]]) + 1))
        assert all(hop in hops for hop in zip(path, path[1:], strict=False))


def test_positions_without_bends_are_the_same_positions(densenet_graph):
    with_bends = layered_drawing(densenet_graph)
    assert with_bends.edge_points  # DenseNet's long edges bend
    assert layered_drawing(densenet_graph, bends=False).edge_points == {}
    assert layout_graph(densenet_graph) == with_bends.positions


def test_a_bend_list_is_its_edge_s_own_part_of_the_chain():
    """Edges sharing a chain get the points of the layers each spans, in order, top down."""
    G = load_script("bench", "graph_shapes.py").heads_graph(40)  # 40 linear heads summed
    placed = layered_drawing(G)
    ys = {y for _, y in placed.positions.values()}
    for (u, v), points in placed.edge_points.items():
        (_, yu), (_, yv) = placed.positions[u], placed.positions[v]
        assert [y for _, y in points] == sorted(y for y in ys if yu < y < yv)
