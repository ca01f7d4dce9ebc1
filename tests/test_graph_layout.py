"""Layouts and module collapsing: positions, downward edges, crossings, size guards."""

import itertools
import math
import warnings

import networkx as nx
import numpy as np
import pytest

from gradexplorer.core.graph.collapse import (
    collapse_by_module,
    expansions_to_reveal,
    groups_at_depth,
    layer_count,
    module_node_id,
    readable_depth,
)
from gradexplorer.core.graph.extract import trace_backward_graph
from gradexplorer.core.graph.layout.crossings import count_crossings, count_inversions
from gradexplorer.core.graph.layout.positions import (
    LAYOUTS,
    NODE_LIMITS,
    LayoutWarning,
    check_size,
    layered_drawing,
    layout_graph,
)
from gradexplorer.core.graph.style import node_width
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.model.spec import ModelOptions, load_workload
from gradexplorer.core.session.engine import SessionConfig, TrainingSession


def traced(spec):
    session = TrainingSession(load_workload(spec, ModelOptions()), SessionConfig(device="cpu"))
    return trace_backward_graph(session)


@pytest.fixture(scope="module")
def lenet():
    return traced("example:lenet")


@pytest.fixture(scope="module")
def deep():
    return traced("example:deep:blocks=5")


@pytest.mark.parametrize("name", LAYOUTS)
def test_every_layout_places_every_node(lenet, name):
    pos = layout_graph(lenet, name)
    assert set(pos) == set(lenet)
    coords = np.array(list(pos.values()))
    assert np.isfinite(coords).all()
    if name != "spectral":  # spectral puts twin leaves on one spot, by design
        assert len({tuple(np.round(c, 3)) for c in coords}) == len(pos)
    root_y = pos[lenet.graph["root"]][1]
    if name in ("layered", "multipartite"):
        assert root_y == min(y for _, y in pos.values())  # the loss on top


def test_layered_layout_flows_down_without_overlaps(lenet):
    drawing = layered_drawing(lenet, with_crossings=True)
    pos = drawing.positions
    assert drawing.crossings == 0
    assert all(pos[v][1] > pos[u][1] for u, v in lenet.edges)
    rows = {}
    for node, (x, y) in pos.items():
        rows.setdefault(y, []).append((x, node_width(lenet.nodes[node])))
    for row in rows.values():
        row.sort()
        for (x0, w0), (x1, w1) in itertools.pairwise(row):
            assert x1 - x0 >= (w0 + w1) / 2
    for (u, v), bends in drawing.edge_points.items():
        ys = [pos[u][1], *(y for _, y in bends), pos[v][1]]
        assert ys == sorted(ys) and len(bends) >= 1


def test_layered_layout_handles_cycles_and_odd_graphs():
    G = nx.DiGraph([(0, 1), (1, 2), (2, 0), (2, 3), (4, 4), (5, 6)])
    pos = layout_graph(G)
    assert set(pos) == set(G)
    assert layout_graph(nx.DiGraph()) == {}
    single = nx.DiGraph()
    single.add_node("x", name="only")
    assert set(layout_graph(single)) == {"x"}


def brute_crossings(pos, layer, edges):
    return sum(
        1 for (a, b), (c, d) in itertools.combinations(edges, 2)
        if layer[a] == layer[c] and (pos[a] - pos[c]) * (pos[b] - pos[d]) < 0
    )


def test_crossing_count_matches_brute_force():
    rng = np.random.default_rng(1)
    for _ in range(30):
        sizes = rng.integers(1, 6, 4)
        layer = np.repeat(np.arange(4), sizes)
        pos = np.concatenate([rng.permutation(s) for s in sizes]).astype(float)
        edges = [(u, v) for u in range(len(layer)) for v in range(len(layer))
                 if layer[v] == layer[u] + 1 and rng.random() < 0.5]
        if not edges:
            continue
        src, dst = (np.array(x) for x in zip(*edges, strict=True))
        assert count_crossings(pos, layer, src, dst) == brute_crossings(pos, layer, edges)
    seq = rng.integers(0, 9, 200)
    pairs = itertools.combinations(range(200), 2)
    assert count_inversions(seq) == sum(1 for i, j in pairs if seq[i] > seq[j])


def test_crossings_are_removed_where_possible():
    # two chains drawn crossed at first: a0 -> b1, a1 -> b0 fed from one root
    G = nx.DiGraph([("r", "a0"), ("r", "a1"), ("a0", "b1"), ("a1", "b0"), ("b0", "c0"), ("b1", "c1")])
    assert layered_drawing(G, with_crossings=True).crossings == 0
    K = nx.DiGraph([(f"u{i}", f"v{j}") for i in range(3) for j in range(3)])  # K3,3 must cross
    assert layered_drawing(K, with_crossings=True).crossings == 9


def test_networkx_layouts_refuse_big_graphs_and_warn_on_slow_ones():
    with pytest.raises(UserError, match="spring layout cannot handle"):
        layout_graph(nx.path_graph(NODE_LIMITS["spring"] + 1, create_using=nx.DiGraph), "spring")
    with pytest.raises(UserError, match="unknown layout"):
        layout_graph(nx.DiGraph(), "circular")
    with pytest.warns(LayoutWarning, match="may take a while"):
        check_size("kamada_kawai", NODE_LIMITS["kamada_kawai"] - 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_size("spring", 10)
        check_size("layered", 10**6)


def test_collapse_by_depth_gives_one_node_per_block(deep):
    H = collapse_by_module(deep, depth=2)
    modules = {a["module"] for _, a in H.nodes(data=True) if a["kind"] == "module"}
    assert modules == {"inp", "out", *(f"blocks.{i}" for i in range(5))}
    block = H.nodes[module_node_id("blocks.2")]
    assert block["name"] == "ResidualBlock" and block["members"] == 6
    assert sorted(block["params"]) == ["blocks.2.fc.bias", "blocks.2.fc.weight"]
    assert H.has_edge(module_node_id("blocks.3"), module_node_id("blocks.2"))
    assert not any(u == v for u, v in H.edges) and H.graph["root"] in H
    folded = sum(a["members"] for _, a in H.nodes(data=True) if a["kind"] == "module")
    assert folded + sum(1 for _, a in H.nodes(data=True) if a["kind"] != "module") == len(deep)
    assert layered_drawing(H, with_crossings=True).crossings == 0


def test_collapse_chosen_modules_and_expand(deep):
    H = collapse_by_module(deep, modules=["blocks"])
    assert [a["module"] for _, a in H.nodes(data=True) if a["kind"] == "module"] == ["blocks"]
    assert H.nodes[module_node_id("blocks")]["members"] == 30
    opened = collapse_by_module(deep, depth=2, expanded=["blocks.2"])
    assert module_node_id("blocks.2") not in opened and module_node_id("blocks.2.fc") in opened
    block_ops = [a["name"] for _, a in opened.nodes(data=True) if a["module"] == "blocks.2"]
    assert sorted(block_ops) == ["AddBackward0", "ReluBackward0"]
    assert collapse_by_module(deep).number_of_nodes() == len(deep)  # nothing to fold
    assert math.isfinite(sum(x for x, _ in layout_graph(opened).values()))


def test_readable_depth_folds_big_graphs_only(lenet, deep):
    assert readable_depth(lenet) is None and readable_depth(deep) is None  # small: every op
    for depth in (1, 2, 3):
        assert groups_at_depth(deep, depth) == collapse_by_module(deep, depth=depth).number_of_nodes()
    assert readable_depth(deep, most_nodes=8, small=10) == 2  # 9 nodes at depth 2: too many
    assert readable_depth(deep, most_nodes=9, small=10) == 2
    assert readable_depth(deep, most_nodes=100, small=10) == 3  # depth 3 opens blocks.N.fc
    assert readable_depth(deep, most_nodes=2, small=10) == 1  # nothing fits: the coarsest
    assert readable_depth(deep, most_nodes=100, small=10, most_layers=7) == 1  # 8 in a row at 2
    assert readable_depth(deep, most_nodes=100, small=10, most_layers=8) == 2
    assert layer_count(deep) > 10  # few nodes but a long chain: folded too (it would not read)
    assert readable_depth(deep, small=1000, most_layers=10) is not None
    assert readable_depth(deep, small=1000, most_layers=layer_count(deep)) is None


def test_expansions_reveal_a_node_inside_collapsed_modules(deep):
    hidden = next(n for n, a in deep.nodes(data=True) if a["module"] == "blocks.3.fc"
                  and a["name"] == "AddmmBackward0")
    assert hidden not in collapse_by_module(deep, depth=1)
    opened = expansions_to_reveal("blocks.3.fc", 1)
    assert opened == ["blocks", "blocks.3", "blocks.3.fc"]
    shown = collapse_by_module(deep, depth=1, expanded=opened)
    assert hidden in shown and module_node_id("blocks.2") in shown
    assert expansions_to_reveal("blocks.3.fc", 2, expanded=["blocks.3"]) == ["blocks.3.fc"]
    assert expansions_to_reveal("blocks.3.fc", None) == []


def test_a_module_s_own_nodes_stay_beside_its_folded_submodules():
    """At depth 2 the submodules of ``seq`` fold into ``seq.0`` and ``seq.1``; the two hook
    nodes directly in ``seq`` (a full backward hook on the Sequential) stay as they are, so the
    chain reads hook → seq.1 → seq.0 → hook instead of a ``seq`` node in a cycle with them."""
    G = nx.DiGraph()
    chain = [("loss", "", "loss"), ("hook_out", "seq", "hook"), ("a", "seq.1", "op"),
             ("b", "seq.1.relu", "op"), ("c", "seq.0", "op"), ("hook_in", "seq", "hook"),
             ("w", "seq.0", "param")]
    for node, module, kind in chain:
        G.add_node(node, name=node, module=module, kind=kind, param="seq.0.w" if kind == "param"
                   else None)
    nx.add_path(G, [n for n, _, _ in chain[:-1]])
    G.add_edge("c", "w")  # seq.0's weight hangs off its op
    H = collapse_by_module(G, depth=2)
    assert {"hook_out", "hook_in"} <= set(H) and module_node_id("seq") not in H
    assert H.nodes[module_node_id("seq.1")]["members"] == 2
    assert nx.is_directed_acyclic_graph(H)
    assert groups_at_depth(G, 2) == H.number_of_nodes()
    assert module_node_id("seq") in collapse_by_module(G, depth=1)  # at depth 1 it folds whole
