"""Layouts of graphs with dense skip connections (DenseNet's concatenations) stay linear in
the graph's size: long edges share chains of bend points wherever the bundle reads exactly."""

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


def test_long_edges_share_chains_where_the_bundle_reads_exactly(densenet_graph):
    nodes, src, dst = graph_arrays(densenet_graph)
    n = len(nodes)
    layer, src, dst, _ = assign_layers(n, src, dst, [])
    full, psrc, pdst, (long, first, count) = add_dummies(n, layer, src, dst)
    one_per_edge = int((layer[dst[long]] - layer[src[long]] - 1).sum())
    one_per_end = sum(int(layer[v] - layer[src[long][dst[long] == v]].min() - 1)
                      for v in np.unique(dst[long]))
    dummies = len(full) - n
    # a dense block's concatenations share one chain: fewer bend points than nodes (one chain
    # per lower end had ~9×, one per edge ~50× more)
    assert dummies < n and dummies * 8 < one_per_end and dummies * 40 < one_per_edge
    # every long edge still runs down one layer a hop, from its upper end into its lower end
    hops = set(zip(psrc.tolist(), pdst.tolist(), strict=True))
    for e, f, k in zip(long.tolist(), first.tolist(), count.tolist(), strict=True):
        path = [int(src[e]), *range(f, f + k), int(dst[e])]
        assert [int(full[p]) for p in path] == list(range(int(layer[src[e]]), int(layer[dst[e]]) + 1))
        assert all(hop in hops for hop in zip(path, path[1:], strict=False))
    # read as drawn, the chains connect exactly the long edges' ends
    assert reached_through_chains(n, psrc, pdst, set(src[long].tolist())) == set(
        zip(src[long].tolist(), dst[long].tolist(), strict=True))


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


def reached_through_chains(n, psrc, pdst, uppers):
    """(upper end, node) pairs joined through bend points only, as the drawing reads."""
    down: dict[int, set[int]] = {}
    for a, b in zip(psrc.tolist(), pdst.tolist(), strict=True):
        down.setdefault(a, set()).add(b)
    seen = set()
    for u in uppers:
        stack = [b for b in down.get(u, ()) if b >= n]
        while stack:
            d = stack.pop()
            stack.extend(b for b in down.get(d, ()) if b >= n)
            seen.update((u, b) for b in down.get(d, ()) if b < n)
    return seen


def test_shared_chains_never_join_what_the_graph_does_not():
    """Random DAGs: every hop spans one layer and the chains join exactly the long edges' ends,
    however the chains were shared (some are: fewer bend points than one chain per end)."""
    rng = np.random.default_rng(0)
    shared = 0
    for _ in range(120):
        n = int(rng.integers(5, 50))
        a, b = rng.integers(0, n, (2, int(rng.integers(n, 4 * n))))
        pairs = np.unique(np.stack([a[a < b], b[a < b]], 1), axis=0)
        layer, src, dst, _ = assign_layers(n, pairs[:, 0], pairs[:, 1], [])
        full, psrc, pdst, (long, _first, _count) = add_dummies(n, layer, src, dst)
        assert (full[pdst] == full[psrc] + 1).all()
        uppers = set(src[long].tolist())
        assert reached_through_chains(n, psrc, pdst, uppers) == set(
            zip(src[long].tolist(), dst[long].tolist(), strict=True))
        one_per_end = sum(int(layer[v] - layer[src[long][dst[long] == v]].min() - 1)
                          for v in np.unique(dst[long]))
        shared += len(full) - n < one_per_end
    assert shared > 10
