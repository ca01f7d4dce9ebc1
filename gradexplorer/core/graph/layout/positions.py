"""Node positions for a backward graph: our layered layout, or one of networkx's own.

Every layout returns ``{node: (x, y)}`` in drawing pixels with y growing downward, so the
same drawing code serves all of them. networkx's layouts refuse graphs too big for them
(``UserError``) instead of running for minutes, and warn when they will be slow.
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from gradexplorer.core.graph.layout import LAYOUTS
from gradexplorer.core.graph.layout.layered import assign_layers, layered_layout
from gradexplorer.core.graph.style import LAYER_STEP, node_width
from gradexplorer.core.messages.errors import UserError

# Largest graph each networkx layout may try. Measured on a busy 2-core machine: spring
# takes ~1.3 s at 500 nodes and ~7 s at 1,000; kamada_kawai ~1.3 s at 300 and ~40 s at 600;
# spectral ~0.5 s at 3,000 and minutes at 20,000. The layered layout has no limit.
NODE_LIMITS = {"spring": 600, "kamada_kawai": 300, "spectral": 3000, "shell": 20000,
               "multipartite": 60000}
SLOW_FRACTION = 0.25  # warn above this share of the limit

Position = tuple[float, float]


class LayoutWarning(UserWarning):
    """A layout will be slow for this graph."""


@dataclass
class PlacedGraph:
    """Positions plus, for the layered layout, where long edges bend."""

    positions: dict[Hashable, Position]
    edge_points: dict[tuple[Hashable, Hashable], list[Position]] = field(default_factory=dict)
    crossings: int | None = None


def graph_arrays(G: nx.DiGraph) -> tuple[list, np.ndarray, np.ndarray]:
    """Nodes in graph order and the edges as index arrays."""
    nodes = list(G)
    index = {v: i for i, v in enumerate(nodes)}
    pairs = np.fromiter((index[x] for e in G.edges for x in e), dtype=np.int64,
                        count=2 * G.number_of_edges())
    return nodes, pairs[0::2], pairs[1::2]


def graph_roots(G: nx.DiGraph) -> list:
    """The loss node when the graph names one, else every node without inputs."""
    root = G.graph.get("root")
    if root is not None and root in G:
        return [root]
    return [v for v, d in G.in_degree() if d == 0]


def layered_drawing(G: nx.DiGraph, *, rounds: int = 6, with_crossings: bool = False,
                    bends: bool = True) -> PlacedGraph:
    """Top-down layered layout: loss on top, leaves below their consumers, few crossings.

    ``bends=False`` leaves ``edge_points`` empty: a long edge's points are one per layer it
    spans, which on a wide graph whose edges span thousands of layers is most of the work."""
    nodes, src, dst = graph_arrays(G)
    if not nodes:
        return PlacedGraph({})
    widths = np.fromiter((node_width(a) for _, a in G.nodes(data=True)), dtype=np.float64,
                         count=len(nodes))
    root_set = set(graph_roots(G))
    roots = [i for i, v in enumerate(nodes) if v in root_set]
    d = layered_layout(len(nodes), src, dst, widths, roots, layer_step=LAYER_STEP, rounds=rounds)
    n = len(nodes)
    positions = dict(zip(nodes, zip(d.x[:n].tolist(), d.y[:n].tolist(), strict=True), strict=True))
    if not bends:
        return PlacedGraph(positions, {}, d.crossings() if with_crossings else None)
    flipped = set(d.reversed_edges.tolist())
    points_of: dict[tuple[Hashable, Hashable], list[Position]] = {}
    xs, ys = d.x[n:].tolist(), d.y[n:].tolist()  # dummy nodes only
    ends = zip(src[d.long_edges].tolist(), dst[d.long_edges].tolist(), strict=True)
    for e, (u, v), first, count in zip(d.long_edges.tolist(), ends, (d.first_dummy - n).tolist(),
                                       d.dummy_count.tolist(), strict=True):
        points = [(xs[c], ys[c]) for c in range(first, first + count)]
        if e in flipped:
            points.reverse()
        points_of[(nodes[u], nodes[v])] = points
    return PlacedGraph(positions, points_of, d.crossings() if with_crossings else None)


def layout_graph(G: nx.DiGraph, name: str = "layered") -> dict[Hashable, Position]:
    """``{node: (x, y)}`` by the layout ``name`` (one of ``LAYOUTS``)."""
    return layout_drawing(G, name, bends=False).positions


def layout_drawing(G: nx.DiGraph, name: str = "layered", bends: bool = True) -> PlacedGraph:
    """Like ``layout_graph`` but keeps the layered layout's edge bends (unless ``bends=False``)."""
    if name not in LAYOUTS:
        raise UserError(f"unknown layout {name!r}; choose one of: {', '.join(LAYOUTS)}")
    if name == "layered":
        return layered_drawing(G, bends=bends)
    check_size(name, G.number_of_nodes())
    if G.number_of_nodes() == 0:
        return PlacedGraph({})
    try:
        raw = _networkx_layout(G, name)
    except ImportError as exc:
        raise UserError(f"the {name} layout needs {exc.name or 'scipy'}; install it or use layered") from None
    return PlacedGraph(_to_pixels(raw, G.number_of_nodes(), flip=name != "multipartite"))


def check_size(name: str, n: int) -> None:
    """Refuse a graph too big for layout ``name``; warn when it will be slow."""
    limit = NODE_LIMITS.get(name)
    if limit is None:
        return
    if n > limit:
        raise UserError(
            f"the {name} layout cannot handle {n:,} nodes in reasonable time (limit {limit:,}); "
            "use the layered layout or collapse modules first"
        )
    if n > SLOW_FRACTION * limit:
        warnings.warn(f"the {name} layout may take a while for {n:,} nodes", LayoutWarning, stacklevel=3)


def _networkx_layout(G: nx.DiGraph, name: str) -> dict:
    if name == "spring":
        return nx.spring_layout(G, seed=0)
    if name == "kamada_kawai":
        return nx.kamada_kawai_layout(G)
    if name == "spectral":
        return nx.spectral_layout(G) if G.number_of_nodes() > 2 else nx.circular_layout(G)
    if name == "shell":
        return nx.shell_layout(G)
    return _multipartite(G)


def _multipartite(G: nx.DiGraph) -> dict:
    """One row per layer (topological generation; cycles broken first), loss on top."""
    nodes, src, dst = graph_arrays(G)
    index = {v: i for i, v in enumerate(nodes)}
    layer, *_ = assign_layers(len(nodes), src, dst, [index[r] for r in graph_roots(G)])
    H = nx.Graph()
    H.add_nodes_from((v, {"layer": int(layer[i])}) for i, v in enumerate(nodes))
    H.add_edges_from(G.edges)
    raw = nx.multipartite_layout(H, subset_key="layer", align="horizontal")
    # networkx puts layer 0 at the bottom; put the loss on top with a fixed row height
    return {v: (float(p[0]), float(layer[index[v]])) for v, p in raw.items()}


def _to_pixels(raw: dict, n: int, flip: bool) -> dict[Hashable, Position]:
    """Scale a networkx layout to drawing pixels, y downward."""
    if not flip:  # multipartite: y is already the layer index
        width = max(600.0, 160.0 * np.sqrt(n))
        xs = np.array([p[0] for p in raw.values()])
        span = float(np.ptp(xs)) or 1.0
        return {v: (float((p[0] - xs.min()) / span * width), float(p[1]) * LAYER_STEP)
                for v, p in raw.items()}
    scale = max(300.0, 90.0 * np.sqrt(n))
    return {v: (float(p[0]) * scale, -float(p[1]) * scale) for v, p in raw.items()}
