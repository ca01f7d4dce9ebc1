"""Layer-by-layer crossing reduction in the manner of Graphviz dot, for small graphs.

The vectorised sweeps in ``crossing_reduction`` scale to any size; this sequential pass
(weighted median with nodes that have no neighbours held in place, then transposition until
nothing improves) finds better orders on tangled graphs, at Python speed. The layered layout
uses it where crossings remain on graphs small enough to afford it.
"""

from __future__ import annotations

import numpy as np

from gradexplorer.core.graph.layout.crossings import count_crossings


def _median(values: list[float]) -> float:
    values.sort()
    m = len(values)
    if m % 2:
        return values[m // 2]
    if m == 2:
        return (values[0] + values[1]) / 2
    lo, hi = values[m // 2 - 1] - values[0], values[-1] - values[m // 2]
    if lo + hi == 0:
        return (values[m // 2 - 1] + values[m // 2]) / 2
    return (values[m // 2 - 1] * hi + values[m // 2] * lo) / (lo + hi)  # dot's weighted median


class LayerOrder:
    """Layers as Python lists plus each node's position, for sequential sweeps."""

    def __init__(self, pos: np.ndarray, layer: np.ndarray, src: np.ndarray, dst: np.ndarray):
        n = len(pos)
        self.up: list[list[int]] = [[] for _ in range(n)]
        self.down: list[list[int]] = [[] for _ in range(n)]
        for a, b in zip(src.tolist(), dst.tolist(), strict=True):
            self.down[a].append(b)
            self.up[b].append(a)
        self.layers: list[list[int]] = [[] for _ in range(int(layer.max()) + 1 if n else 0)]
        for v in np.lexsort((pos, layer)).tolist():
            self.layers[int(layer[v])].append(v)
        self.pos = [0] * n
        for nodes in self.layers:
            self._renumber(nodes)

    def _renumber(self, nodes: list[int]) -> None:
        for i, v in enumerate(nodes):
            self.pos[v] = i

    def median_sweep(self, downward: bool) -> None:
        """Sort each layer by the weighted median of its neighbours in the previous one."""
        rank = range(1, len(self.layers)) if downward else range(len(self.layers) - 2, -1, -1)
        neighbours, pos = (self.up if downward else self.down), self.pos
        for li in rank:
            nodes = self.layers[li]
            med = {v: _median([pos[u] for u in neighbours[v]]) for v in nodes if neighbours[v]}
            movable = sorted(med, key=med.__getitem__)
            it = iter(movable)
            nodes[:] = [next(it) if v in med else v for v in nodes]  # others hold their place
            self._renumber(nodes)

    def _pair(self, a: int, b: int) -> tuple[int, int]:
        """Crossings among the edges of neighbours a, b: as they are, and if swapped."""
        pos = self.pos
        now = swapped = 0
        for nb in (self.up, self.down):
            pb = [pos[y] for y in nb[b]]
            for x in nb[a]:
                px = pos[x]
                for py in pb:
                    if px > py:
                        now += 1
                    elif px < py:
                        swapped += 1
        return now, swapped

    def transpose(self, allow_equal: bool, passes: int = 8) -> None:
        """Swap neighbours while that removes crossings (ties too when ``allow_equal``).

        Only layers next to a change are looked at again, as dot does.
        """
        layers, pos = self.layers, self.pos
        candidate = [True] * len(layers)
        for _ in range(passes):
            improved = False
            for li, nodes in enumerate(layers):
                if not candidate[li]:
                    continue
                candidate[li] = False
                for i in range(len(nodes) - 1):
                    a, b = nodes[i], nodes[i + 1]
                    now, swapped = self._pair(a, b)
                    if swapped < now or (allow_equal and now and swapped == now):
                        nodes[i], nodes[i + 1] = b, a
                        pos[a], pos[b] = i + 1, i
                        improved |= swapped < now
                        for lj in (li - 1, li, li + 1):
                            if 0 <= lj < len(layers):
                                candidate[lj] = True
            if not improved:
                return

    def positions(self) -> np.ndarray:
        return np.asarray(self.pos, dtype=np.float64)


def refine_order(pos: np.ndarray, layer: np.ndarray, src: np.ndarray, dst: np.ndarray,
                 iterations: int = 24, patience: int = 8) -> np.ndarray:
    """dot-style mincross iterations from ``pos``; returns the best order seen."""
    state = LayerOrder(pos, layer, src, dst)
    best = state.positions()
    best_crossings = count_crossings(best, layer, src, dst)
    stale = 0
    for it in range(iterations):
        if best_crossings == 0 or stale >= patience:
            break
        state.median_sweep(downward=it % 2 == 0)
        state.transpose(allow_equal=it % 4 >= 2)
        current = state.positions()
        crossings = count_crossings(current, layer, src, dst)
        if crossings < best_crossings:
            best, best_crossings, stale = current, crossings, 0
        else:
            stale += 1
    return best
