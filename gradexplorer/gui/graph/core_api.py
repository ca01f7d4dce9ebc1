"""The graph functions of gradexplorer.core this view uses (one place to find them)."""

from __future__ import annotations

import networkx as nx

try:
    from gradexplorer.core.autograd_graph import trace_backward_graph
except ImportError:  # pragma: no cover - before the graph branch is merged
    trace_backward_graph = None

try:
    from gradexplorer.core.graph_layout import LAYOUTS, layout_graph
except ImportError:  # pragma: no cover - before the graph branch is merged
    LAYOUTS = ("layered",)

    def layout_graph(G: nx.DiGraph, name: str = "layered") -> dict:
        pos = {}
        for layer, nodes in enumerate(nx.topological_generations(G)):
            for j, v in enumerate(sorted(nodes, key=str)):
                pos[v] = (j - len(nodes) / 2, -layer)
        return pos

try:
    from gradexplorer.core.graph_collapse import collapse_by_module
except ImportError:  # pragma: no cover
    collapse_by_module = None
