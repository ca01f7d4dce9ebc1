"""A layered top-down DAG layout (Sugiyama style) in numpy, fast enough for 50k nodes.

Steps: break cycles, longest-path layering from the top, dummy nodes on long edges,
median/barycenter crossing reduction, then x coordinates that pull each node towards its
neighbours while keeping the order and the spacing. The loss sits at the top, leaves at
the bottom of their branches. Coordinates: y grows downward, units are pixels of the
default drawing style.
"""

from __future__ import annotations

import itertools
from array import array
from dataclasses import dataclass, field

import numpy as np

from gradexplorer.core.graph.layout.crossings import count_crossings, ranks_within_layers, reduce_crossings
from gradexplorer.core.graph.layout.ordering import refine_order

# Graphs up to this many nodes + edges (dummies included) that still have crossings after
# the vectorised sweeps also get the slower, sequential dot-style refinement, where that size
# is at most REFINE_PER_NODE times the graph's own nodes: its cost stays within the layout's
# budget per node (issue 43: 1 s per 10k nodes), even where bend points outnumber the nodes.
# Up to REFINE_ALWAYS it costs a few milliseconds: always refined.
REFINE_LIMIT = 6000
REFINE_PER_NODE = 3
REFINE_ALWAYS = 1500


@dataclass
class LayeredDrawing:
    """Result of a layered layout on integer nodes ``0..n-1``.

    ``x``/``y``/``layer``/``order`` cover real nodes then dummy nodes. Input edge
    ``long_edges[i]`` passes through dummy nodes ``first_dummy[i] + 0 .. dummy_count[i] - 1``,
    from its (possibly reversed, see ``reversed_edges``) top end down.
    """

    n: int
    x: np.ndarray
    y: np.ndarray
    layer: np.ndarray
    order: np.ndarray
    src: np.ndarray  # proper (layer-to-next-layer) edges including dummies
    dst: np.ndarray
    long_edges: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    first_dummy: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    dummy_count: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    reversed_edges: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def crossings(self) -> int:
        """Edge crossings between adjacent layers."""
        return count_crossings(self.order, self.layer, self.src, self.dst)


def _ints(values: np.ndarray) -> array:
    """A compact Python int array (8 bytes an element; a list would hold int objects)."""
    return array("q", np.ascontiguousarray(values, dtype=np.int64).tobytes())


def _csr(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[array, array]:
    order = np.argsort(src, kind="stable")
    ptr = np.concatenate(([0], np.cumsum(np.bincount(src, minlength=n))))
    return _ints(ptr), _ints(dst[order])


def topological_layers(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, array]:
    """Longest-path layer of each node (Kahn's algorithm); nodes left over sit on cycles."""
    ptr, targets = _csr(n, src, dst)
    indeg = _ints(np.bincount(dst, minlength=n))
    layer = _ints(np.zeros(n))
    queue = _ints(np.flatnonzero(np.bincount(dst, minlength=n) == 0))
    i = 0
    while i < len(queue):  # the queue grows while we walk it
        v = queue[i]
        i += 1
        lv = layer[v] + 1
        for w in targets[ptr[v]:ptr[v + 1]]:
            if layer[w] < lv:
                layer[w] = lv
            indeg[w] -= 1
            if indeg[w] == 0:
                queue.append(w)
    return np.frombuffer(layer, dtype=np.int64).copy(), queue


def back_edges(n: int, src: np.ndarray, dst: np.ndarray, roots: list[int]) -> np.ndarray:
    """Indices of edges that close a cycle in an iterative depth-first search."""
    order = np.argsort(src, kind="stable")
    ptr = np.concatenate(([0], np.cumsum(np.bincount(src, minlength=n)))).tolist()
    targets, edge_ids = dst[order].tolist(), order.tolist()
    state = [0] * n  # 0 new, 1 on stack, 2 done
    found: list[int] = []
    for start in itertools.chain(roots, range(n)):
        if state[start]:
            continue
        state[start] = 1
        stack = [(start, ptr[start])]
        while stack:
            v, i = stack[-1]
            if i == ptr[v + 1]:
                state[v] = 2
                stack.pop()
                continue
            stack[-1] = (v, i + 1)
            w = targets[i]
            if state[w] == 1:
                found.append(edge_ids[i])
            elif state[w] == 0:
                state[w] = 1
                stack.append((w, ptr[w]))
    return np.asarray(found, dtype=np.int64)


def assign_layers(n: int, src: np.ndarray, dst: np.ndarray, roots: list[int]):
    """Layers after reversing the edges that close cycles; returns (layer, src, dst, reversed)."""
    layer, done = topological_layers(n, src, dst)
    flipped = np.zeros(0, dtype=np.int64)
    if len(done) < n:
        flipped = back_edges(n, src, dst, roots)
        src, dst = src.copy(), dst.copy()
        src[flipped], dst[flipped] = dst[flipped].copy(), src[flipped].copy()
        layer, _ = topological_layers(n, src, dst)
    return _lower_sources(layer, src, dst, roots), src, dst, flipped


def _lower_sources(layer: np.ndarray, src: np.ndarray, dst: np.ndarray, roots: list[int]) -> np.ndarray:
    """Move sources other than the roots down to just above their highest successor."""
    n = len(layer)
    is_source = np.bincount(dst, minlength=n) == 0
    is_source[roots] = False
    if not is_source.any() or len(src) == 0:
        return layer
    top = np.full(n, np.iinfo(np.int64).max)
    np.minimum.at(top, src, layer[dst])
    movable = is_source & (top < np.iinfo(np.int64).max)
    layer = layer.copy()
    layer[movable] = top[movable] - 1
    return layer


def add_dummies(n: int, layer: np.ndarray, src: np.ndarray, dst: np.ndarray):
    """Split edges spanning k > 1 layers into chains of dummy nodes (bend points) that long edges
    share wherever sharing reads the same (``share_chains``).

    A long edge joins its chain in the layer below its upper end and follows it down to the
    layer above its lower end (drawn as one bundled line). The long edges into one node always
    share a chain; the chains of several nodes become one where their sources nest: DenseNet's
    concatenations (every block output feeds every later one) then cost one chain per block,
    not one per node (the square of a block's depth) nor one per edge (its cube).
    """
    span = layer[dst] - layer[src]
    long = np.flatnonzero(span > 1)
    if len(long) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return layer, src.copy(), dst.copy(), (long, empty, empty)
    ends, group = np.unique(dst[long], return_inverse=True)
    upper = layer[src[long]]
    chain_of = share_chains(layer, src[long], group, ends)
    chains = int(chain_of.max()) + 1
    on_chain = chain_of[group]  # each long edge's chain
    top = np.full(chains, np.iinfo(np.int64).max)
    np.minimum.at(top, on_chain, upper)
    bottom = np.zeros(chains, dtype=np.int64)
    np.maximum.at(bottom, chain_of, layer[ends])
    k = bottom - top - 1  # dummies in each chain (one per layer between its ends)
    total = int(k.sum())
    start = n + (np.cumsum(k) - k).astype(np.int64)  # the chain's first (highest) dummy
    j = np.arange(total) - np.repeat(start - n, k)  # a dummy's index along its chain
    dummy = n + np.arange(total)
    first = start[on_chain] + (upper - top[on_chain])  # where each long edge joins its chain
    count = layer[dst[long]] - upper - 1
    # Each edge's first hop keeps the edge's place in the list (so slot order survives);
    # the hops down the chains and the ones out of them into their lower ends follow.
    first_hop = dst.copy()
    first_hop[long] = first
    inner = j > 0
    leave = start[chain_of] + (layer[ends] - top[chain_of] - 2)  # the dummy above each end
    psrc = np.concatenate((src, dummy[inner] - 1, leave))
    pdst = np.concatenate((first_hop, dummy[inner], ends))
    dummy_layer = np.repeat(top, k) + 1 + j
    return np.concatenate((layer, dummy_layer)), psrc, pdst, (long, first, count)


def share_chains(layer: np.ndarray, upper_ends: np.ndarray, group: np.ndarray,
                 ends: np.ndarray) -> np.ndarray:
    """The chain of each of ``ends`` (the lower ends of long edges; ``upper_ends[i]`` is the
    upper end of long edge ``i``, which goes into ``ends[group[i]]``).

    Ends, top down, join an earlier end's chain when reading the bundle stays exact: every
    upper end already on that chain (all above this end) feeds this end too, and this end's
    other upper ends join the chain below where the chain's lowest end leaves it. Any upper
    end whose edges join a chain above where a lower end leaves it then has an edge into that
    lower end, and no other: the drawing shows no connection the graph lacks.
    """
    order = np.argsort(group, kind="stable")
    bounds = np.searchsorted(group[order], np.arange(len(ends) + 1))
    sources = upper_ends[order].tolist()
    end_layer = layer[ends].tolist()
    chain_of = [0] * len(ends)
    chain_sources: list[set[int]] = []
    chain_last: list[int] = []  # the layer of each chain's lowest end so far
    chains_of_source: dict[int, list[int]] = {}
    for e in sorted(range(len(ends)), key=end_layer.__getitem__):
        mine = set(sources[bounds[e]:bounds[e + 1]])
        chosen = -1
        for c in {c for s in mine for c in chains_of_source.get(s, ())}:
            if chain_sources[c] <= mine and all(
                    layer[s] >= chain_last[c] - 1 for s in mine - chain_sources[c]):
                chosen = c
                break
        if chosen < 0:
            chosen = len(chain_sources)
            chain_sources.append(set())
            chain_last.append(0)
        for s in mine - chain_sources[chosen]:
            chains_of_source.setdefault(s, []).append(chosen)
        chain_sources[chosen] |= mine
        chain_last[chosen] = end_layer[e]
        chain_of[e] = chosen
    return np.asarray(chain_of, dtype=np.int64)


def dfs_preorder(n: int, src: np.ndarray, dst: np.ndarray, roots: list[int],
                 reverse: bool = False) -> np.ndarray:
    """Discovery time of every node in a depth-first walk (edges in given or reversed order)."""
    ptr, targets = _csr(n, src[::-1], dst[::-1]) if reverse else _csr(n, src, dst)
    seen = _ints(np.full(n, -1))
    t = 0
    for start in itertools.chain(roots, range(n)):
        if seen[start] >= 0:
            continue
        stack = array("q", [start])
        while stack:
            v = stack.pop()
            if seen[v] >= 0:
                continue
            seen[v] = t
            t += 1
            children = targets[ptr[v]:ptr[v + 1]]
            children.reverse()
            stack.extend(w for w in children if seen[w] < 0)
    return np.frombuffer(seen, dtype=np.int64).astype(np.float64)


def _grouped_cummax(values: np.ndarray, group: np.ndarray) -> np.ndarray:
    big = float(np.ptp(values)) + 1.0 if len(values) else 1.0
    return np.maximum.accumulate(values + group * big) - group * big


def _grouped_rev_cummin(values: np.ndarray, group: np.ndarray) -> np.ndarray:
    big = float(np.ptp(values)) + 1.0 if len(values) else 1.0
    shifted = (values + group * big)[::-1]
    return (np.minimum.accumulate(shifted)[::-1]) - group * big


def assign_x(order: np.ndarray, layer: np.ndarray, src: np.ndarray, dst: np.ndarray,
             half_space: np.ndarray, is_dummy: np.ndarray, iterations: int = 12) -> np.ndarray:
    """x of every node: its order kept, ``half_space`` kept free on each side, edges short.

    Each pass moves nodes towards the weighted mean of their neighbours (above, below or
    both; long-edge chains weigh most so they run straight), then restores spacing with
    the mean of a left-to-right and a right-to-left push, which keeps the order.
    """
    seq = np.lexsort((order, layer))  # nodes as they sit, layer by layer
    group = layer[seq].astype(np.float64)
    space = half_space[seq]
    sep = np.zeros(len(seq))
    sep[1:] = space[:-1] + space[1:]
    first = np.ones(len(seq), dtype=bool)
    first[1:] = group[1:] != group[:-1]
    sep[first] = 0.0
    total = np.cumsum(sep)
    c = total - np.maximum.accumulate(np.where(first, total, 0.0))  # offset inside the layer
    x = np.empty(len(seq))
    x[seq] = c - _group_mean(c, group)
    n = len(order)
    in_deg, out_deg = np.bincount(dst, minlength=n), np.bincount(src, minlength=n)
    link = (in_deg <= 1) & (out_deg <= 1)  # a node inside a chain
    weight = (1.0 + 1.5 * is_dummy[src] + 1.5 * is_dummy[dst] + 4.0 * (is_dummy[src] & is_dummy[dst])
              + 3.0 * (link[src] & link[dst]))
    for i in range(iterations):
        mode = ("up", "down", "both")[i % 3] if i < iterations - 1 else "both"
        num = np.zeros(n)
        den = np.zeros(n)
        if mode in ("up", "both"):
            num += np.bincount(dst, weights=weight * x[src], minlength=n)
            den += np.bincount(dst, weights=weight, minlength=n)
        if mode in ("down", "both"):
            num += np.bincount(src, weights=weight * x[dst], minlength=n)
            den += np.bincount(src, weights=weight, minlength=n)
        want = np.where(den > 0, num / np.maximum(den, 1e-12), x)[seq] - c
        packed = 0.5 * (_grouped_cummax(want, group) + _grouped_rev_cummin(want, group))
        x[seq] = packed + c
    return x


def _group_mean(values: np.ndarray, group: np.ndarray) -> np.ndarray:
    _, inverse, counts = np.unique(group, return_inverse=True, return_counts=True)
    return (np.bincount(inverse, weights=values) / counts)[inverse]


def _best_order(layer: np.ndarray, src: np.ndarray, dst: np.ndarray, roots: list[int],
                rounds: int, n: int) -> np.ndarray:
    """Vectorised crossing reduction from a depth-first order and, if crossings remain, from
    the mirrored one; small graphs (of ``n`` nodes before the bend points) that still cross
    get dot-style refinement of both."""
    ids = np.arange(len(layer), dtype=np.float64)
    found = []
    for reverse in (False, True):
        start = dfs_preorder(len(layer), src, dst, roots, reverse=reverse)
        order = reduce_crossings(ranks_within_layers(layer, start, ids), layer, src, dst, rounds)
        found.append((count_crossings(order, layer, src, dst), reverse, order))
        if found[-1][0] == 0 or rounds == 0:
            return order
    size = len(layer) + len(src)
    if size <= min(REFINE_LIMIT, max(REFINE_PER_NODE * n, REFINE_ALWAYS)):
        found.sort(key=lambda f: f[0])
        tries = found[:] if 2 * size <= REFINE_LIMIT else found[:1]
        for _, reverse, order in tries:
            better = refine_order(order, layer, src, dst)
            found.append((count_crossings(better, layer, src, dst), reverse, better))
    return min(found, key=lambda f: (f[0], f[1]))[2]


def layered_layout(n: int, src: np.ndarray, dst: np.ndarray, widths: np.ndarray,
                   roots: list[int] | None = None, *, layer_step: float = 60.0,
                   node_gap: float = 16.0, edge_gap: float = 10.0, rounds: int = 6) -> LayeredDrawing:
    """Lay out nodes ``0..n-1`` with edges ``src[i] → dst[i]`` top-down.

    ``widths`` are the drawn node widths; ``roots`` go on the top layer (default: sources).
    """
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    keep = src != dst
    edge_ids = np.flatnonzero(keep)
    src, dst = src[keep], dst[keep]
    roots = list(roots or [])
    layer, src, dst, flipped = assign_layers(n, src, dst, roots)
    full_layer, psrc, pdst, routes = add_dummies(n, layer, src, dst)
    total = len(full_layer)
    is_dummy = np.arange(total) >= n
    order = _best_order(full_layer, psrc, pdst, roots, rounds, n)
    half = np.where(is_dummy, edge_gap / 2, 0.5 * node_gap)
    half[:n] += 0.5 * np.asarray(widths, dtype=np.float64)
    x = assign_x(order, full_layer, psrc, pdst, half, is_dummy)
    if total:
        x -= (x - half).min()
    y = full_layer.astype(np.float64) * layer_step
    long, first, count = routes
    return LayeredDrawing(n, x, y, full_layer, order, psrc, pdst, long_edges=edge_ids[long],
                          first_dummy=first, dummy_count=count, reversed_edges=edge_ids[flipped])
