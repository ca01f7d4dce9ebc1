"""A laid-out graph as flat arrays for fast drawing, culling, hit-testing and search (Qt-free)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from itertools import compress
from typing import TYPE_CHECKING

import numpy as np

from gradexplorer.core.graph.style import NODE_H, NODE_W, node_label, node_lines
from gradexplorer.core.model.membership import in_module, owner_of

if TYPE_CHECKING:
    import networkx as nx

KIND_CODES = ("op", "param", "hook", "loss", "module", "other")
LAYERED = ("layered", "multipartite")


def label_matches(needle: str, label: str, module: str, param: str | None) -> bool:
    """Whether a node's op name, module or parameter contains ``needle`` (lower-case)."""
    return needle in label.lower() or needle in module.lower() or (
        param is not None and needle in param.lower())


def search_graph(graph: nx.DiGraph, text: str, skip_hooks: bool = False) -> list[Hashable]:
    """Nodes of a whole (uncollapsed) graph matching ``text``, as :meth:`GraphDrawing.search`."""
    needle = text.strip().lower()
    if not needle:
        return []
    return [node for node, attrs in graph.nodes(data=True)
            if not (skip_hooks and attrs.get("kind") == "hook")
            and label_matches(needle, node_label(attrs), attrs.get("module") or "",
                              attrs.get("param"))]


class GraphDrawing:
    """Node positions (scene units, loss at the top), kinds, labels and edges as arrays."""

    def __init__(self, graph: nx.DiGraph, pos: Mapping[Hashable, tuple[float, float]],
                 layout: str = "layered", normalised: bool = False) -> None:
        """``pos``: a layout's positions, or with ``normalised`` scene positions as in ``xy``."""
        self.graph = graph
        self.kept: np.ndarray | None = None  # with_graph: which nodes of the drawing it edits
        self.ids: list[Hashable] = list(graph.nodes)
        self.index = {node: i for i, node in enumerate(self.ids)}
        attrs = [graph.nodes[n] for n in self.ids]
        self.kinds = np.array([KIND_CODES.index(a.get("kind", "other"))
                               if a.get("kind") in KIND_CODES else KIND_CODES.index("other")
                               for a in attrs], dtype=np.int8)
        self.labels = [node_lines(a) for a in attrs]
        self.modules = [a.get("module") or "" for a in attrs]
        self.params = [a.get("param") for a in attrs]
        raw = np.array([pos[n] for n in self.ids], dtype=float).reshape(-1, 2)
        self.layout = layout
        self.xy = raw if normalised else normalise_positions(raw, layout in LAYERED,
                                                             self._root_index(graph))
        edges = [(self.index[u], self.index[v]) for u, v in graph.edges if u in self.index]
        self.edges = np.array(edges, dtype=np.int64).reshape(-1, 2)

    def with_graph(self, graph: nx.DiGraph) -> GraphDrawing:
        """The drawing of ``graph``, an edit of this one: kept nodes stay where they are (and
        ``kept`` says which), new nodes, last, sit between the nodes they link."""
        keep = np.fromiter((node in graph._node for node in self.ids), bool, len(self.ids))
        kept_ids = list(compress(self.ids, keep))
        added = [node for node in graph if node not in self.index]
        if list(graph) != kept_ids + added:  # not an edit that keeps the order: start over
            pos = {n: self.xy[self.index[n]] if n in self.index else (0.0, 0.0) for n in graph}
            return GraphDrawing(graph, pos, self.layout, normalised=True)
        fresh = GraphDrawing(graph.subgraph(added), dict.fromkeys(added, (0.0, 0.0)),
                             normalised=True)
        new = GraphDrawing.__new__(GraphDrawing)
        new.graph, new.layout, new.kept = graph, self.layout, keep
        new.ids = kept_ids + added
        new.index = {node: i for i, node in enumerate(new.ids)}
        new.kinds = np.concatenate([self.kinds[keep], fresh.kinds])
        new.xy = np.concatenate([self.xy[keep], fresh.xy])
        new.labels = list(compress(self.labels, keep)) + fresh.labels
        new.modules = list(compress(self.modules, keep)) + fresh.modules
        new.params = list(compress(self.params, keep)) + fresh.params
        placed = np.ones(len(new.ids), dtype=bool)
        placed[len(kept_ids):] = False
        for node in added:  # beside the node it feeds, as a hook node sits on the edges it splits
            below = [new.index[n] for n in graph.successors(node) if placed[new.index[n]]]
            near = below + [new.index[n] for n in graph.predecessors(node) if placed[new.index[n]]]
            want = new.xy[near].mean(axis=0) if near else self.xy.mean(axis=0)
            if below:  # on the row of the node it feeds
                want[1] = new.xy[below[0], 1]
            i = new.index[node]
            new.xy[i] = free_spot(new.xy[placed], want)
            placed[i] = True
        index = new.index
        new.edges = np.array([(index[u], index[v]) for u, nbrs in graph._adj.items() for v in nbrs],
                             dtype=np.int64).reshape(-1, 2)
        return new

    def _root_index(self, graph: nx.DiGraph) -> int | None:
        root = graph.graph.get("root")
        return self.index.get(root) if root is not None else None

    def __len__(self) -> int:
        return len(self.ids)

    def bounds(self) -> tuple[float, float, float, float]:
        """(left, top, width, height) of every node box."""
        if not len(self):
            return 0.0, 0.0, NODE_W, NODE_H
        lo, hi = self.xy.min(axis=0), self.xy.max(axis=0)
        return (float(lo[0] - NODE_W), float(lo[1] - NODE_H),
                float(hi[0] - lo[0] + 2 * NODE_W), float(hi[1] - lo[1] + 2 * NODE_H))

    def visible_nodes(self, left: float, top: float, right: float, bottom: float) -> np.ndarray:
        """Indices of nodes whose box meets the rectangle."""
        x, y = self.xy[:, 0], self.xy[:, 1]
        mask = ((x > left - NODE_W / 2) & (x < right + NODE_W / 2)
                & (y > top - NODE_H / 2) & (y < bottom + NODE_H / 2))
        return np.flatnonzero(mask)

    def visible_edges(self, left: float, top: float, right: float, bottom: float) -> np.ndarray:
        """Indices of edges whose bounding box meets the rectangle."""
        if not len(self.edges):
            return np.empty(0, dtype=np.int64)
        a, b = self.xy[self.edges[:, 0]], self.xy[self.edges[:, 1]]
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        mask = (hi[:, 0] >= left) & (lo[:, 0] <= right) & (hi[:, 1] >= top) & (lo[:, 1] <= bottom)
        return np.flatnonzero(mask)

    def node_at(self, x: float, y: float, slack: float = 0.0) -> int | None:
        """Index of the node whose box contains (x, y), else None."""
        if not len(self):
            return None
        d = np.abs(self.xy - (x, y))
        inside = np.flatnonzero((d[:, 0] <= NODE_W / 2 + slack) & (d[:, 1] <= NODE_H / 2 + slack))
        if not len(inside):
            return None
        return int(inside[np.argmin((d[inside] ** 2).sum(axis=1))])

    def search(self, text: str) -> list[int]:
        """Nodes whose op name, module or parameter contains ``text`` (case-insensitive)."""
        needle = text.strip().lower()
        if not needle:
            return []
        return [i for i, (label, module, param) in enumerate(
            zip(self.labels, self.modules, self.params, strict=True))
                if label_matches(needle, label[0], module, param)]

    def shown_as(self, node: Hashable, module: str) -> int | None:
        """Index of ``node`` here, or of the collapsed module that holds it (None: neither)."""
        if node in self.index:
            return self.index[node]
        from gradexplorer.core.graph.collapse import MODULE_PREFIX  # (networkx: loaded by now)

        parts = module.split(".") if module else []
        for cut in range(len(parts), 0, -1):  # innermost folded module first
            index = self.index.get(MODULE_PREFIX + ".".join(parts[:cut]))
            if index is not None:
                return index
        return None

    def nodes_of_module(self, path: str) -> list[int]:
        """Nodes produced by module ``path`` or its submodules (and its parameters)."""
        return [i for i, (module, param) in enumerate(zip(self.modules, self.params, strict=True))
                if in_module(module if param is None else owner_of(param), path)]


def free_spot(taken: np.ndarray, want: np.ndarray, gap: float = 0.1 * NODE_W) -> np.ndarray:
    """The point nearest ``want`` on its row (alternating right, left) where a node box keeps
    ``gap`` from every box centred on ``taken``: nothing is drawn over another node."""
    row = taken[np.abs(taken[:, 1] - want[1]) < NODE_H + gap, 0]
    step = NODE_W + gap
    for k in range(len(row) + 1):  # the row's nodes can block at most that many candidates
        for x in ((want[0] + k * step, want[0] - k * step) if k else (want[0],)):
            if not np.any(np.abs(row - x) < step):
                return np.array([x, want[1]])
    return np.array([row.max() + step, want[1]])


def normalise_positions(raw: np.ndarray, layered: bool, root: int | None) -> np.ndarray:
    """Scale a layout to node-sized spacing and put the root (loss) at the top."""
    if len(raw) == 0:
        return raw
    xy = raw - raw.mean(axis=0)
    if root is not None and xy[root, 1] > np.median(xy[:, 1]):
        xy[:, 1] = -xy[:, 1]  # scene y grows downwards
    if layered:
        sx, sy = _row_gap(xy[:, 0], xy[:, 1]), _gap(np.unique(np.round(xy[:, 1], 9)))
        scale = np.array([NODE_W * 1.15 / sx if sx else 1.0, NODE_H * 1.6 / sy if sy else 1.0])
    else:
        w, h = np.ptp(xy, axis=0)
        spacing = np.sqrt(max(w * h, 1e-12) / len(xy)) if len(xy) > 1 else 1.0
        scale = np.full(2, NODE_W * 1.6 / spacing if spacing else 1.0)
    return xy * scale


def _gap(sorted_values: np.ndarray) -> float:
    diffs = np.diff(sorted_values)
    diffs = diffs[diffs > 1e-9]
    return float(np.median(diffs)) if len(diffs) else 0.0


def _row_gap(x: np.ndarray, y: np.ndarray) -> float:
    order = np.lexsort((x, np.round(y, 9)))
    xs, ys = x[order], np.round(y[order], 9)
    same_row = ys[1:] == ys[:-1]
    diffs = np.diff(xs)[same_row]
    diffs = diffs[diffs > 1e-9]
    return float(np.min(diffs)) if len(diffs) else 0.0
