"""Order the nodes inside each layer of a proper layered graph so few edges cross.

All arrays describe a *proper* layered graph: every edge ``u → v`` has
``layer[v] == layer[u] + 1``. Orders are float arrays ``pos`` giving each node's rank
within its layer. Sweeps are vectorised over all layers of one parity at once
(odd layers against their fixed even neighbours, then the reverse), so a graph with tens
of thousands of layers costs a few numpy calls per sweep, not a Python loop per layer.
"""

from __future__ import annotations

import numpy as np


def ranks_within_layers(layer: np.ndarray, key: np.ndarray, tiebreak: np.ndarray) -> np.ndarray:
    """Rank of each node inside its layer when sorted by ``key`` then ``tiebreak``."""
    order = np.lexsort((tiebreak, key, layer))
    starts = np.searchsorted(layer[order], layer[order], side="left")
    ranks = np.empty(len(layer), dtype=np.float64)
    ranks[order] = np.arange(len(layer)) - starts
    return ranks


def _medians(node: np.ndarray, other_pos: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Median of ``other_pos`` grouped by ``node`` (mean of the two middles); degree per node."""
    deg = np.bincount(node, minlength=n)
    if len(node) == 0:
        return np.zeros(n), deg
    order = np.lexsort((other_pos, node))
    vals = other_pos[order]
    start = np.concatenate(([0], np.cumsum(deg)[:-1]))
    has = deg > 0
    lo = start[has] + (deg[has] - 1) // 2
    hi = start[has] + deg[has] // 2
    med = np.zeros(n)
    med[has] = 0.5 * (vals[lo] + vals[hi])
    return med, deg


def _bary(node: np.ndarray, other_pos: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    deg = np.bincount(node, minlength=n)
    total = np.bincount(node, weights=other_pos, minlength=n)
    return total / np.maximum(deg, 1), deg


def sweep(pos: np.ndarray, layer: np.ndarray, src: np.ndarray, dst: np.ndarray,
          parity: int, downward: bool, use_median: bool) -> np.ndarray:
    """Reorder the layers of one parity by the median/barycenter of their fixed neighbours."""
    n = len(pos)
    node, other = (dst, src) if downward else (src, dst)
    value, deg = (_medians if use_median else _bary)(node, pos[other], n)
    moving = (layer % 2 == parity) & (deg > 0)
    key = np.where(moving, value, pos)
    return ranks_within_layers(layer, key, pos)


def count_crossings(pos: np.ndarray, layer: np.ndarray, src: np.ndarray, dst: np.ndarray) -> int:
    """Edge crossings between adjacent layers of a proper layered graph (exact)."""
    if len(src) < 2:
        return 0
    width = int(pos.max()) + 2 if len(pos) else 1
    # Sort edges by (upper layer, upper position, lower position); crossings are then the
    # inversions of the lower positions inside each layer pair. Offsetting lower positions by
    # layer keeps inversions from spanning two layer pairs.
    order = np.lexsort((pos[dst], pos[src], layer[src]))
    seq = layer[src][order].astype(np.int64) * width + pos[dst][order].astype(np.int64)
    return count_inversions(seq)


def count_inversions(seq: np.ndarray) -> int:
    """Number of pairs i < j with seq[i] > seq[j], by a vectorised bottom-up merge count."""
    values = np.unique(np.asarray(seq), return_inverse=True)[1].astype(np.int64).ravel()
    n = len(values)
    total = 0
    width = 1
    idx = np.arange(n, dtype=np.int64)
    span = 2 * (int(values.max()) + 1) if n else 2
    where = np.empty(n, dtype=np.int64)
    while width < n:
        start = (idx // (2 * width)) * (2 * width)
        right = (idx - start) >= width
        # Sort by (block, value, side): inside a block both halves are already sorted runs,
        # so the stable sort is a cheap merge. Equal values put left elements first, so a
        # right element counts only the strictly greater left elements before it.
        order = np.argsort(start * span + 2 * values + right, kind="stable")
        where[order] = idx
        k = idx[right] - start[right] - width  # rank of a right element inside its half
        left_before = where[right] - start[right] - k
        total += int((width - left_before).sum())
        values = values[order]
        width *= 2
    return total


def _pair_crossings(pos, src, dst, a, b, pair_of_a, pair_of_b, big):
    """For neighbour pairs (a[k], b[k]) in one layer: crossings as ordered, and if swapped."""
    now = np.zeros(len(a))
    swapped = np.zeros(len(a))
    for end, other in ((dst, src), (src, dst)):  # edges from above, then edges to below
        kb = pair_of_b[end]
        on_b = kb >= 0
        keys_b = np.sort(kb[on_b] * big + pos[other[on_b]])
        ka = pair_of_a[end]
        on_a = ka >= 0
        k = ka[on_a]
        mine = k * big + pos[other[on_a]]
        lo = np.searchsorted(keys_b, k * big, side="left")
        hi = np.searchsorted(keys_b, (k + 1) * big, side="left")
        below = np.searchsorted(keys_b, mine, side="left") - lo
        above = hi - np.searchsorted(keys_b, mine, side="right")
        now += np.bincount(k, weights=below, minlength=len(a))
        swapped += np.bincount(k, weights=above, minlength=len(a))
    return now, swapped


def transpose(pos: np.ndarray, layer: np.ndarray, src: np.ndarray, dst: np.ndarray,
              passes: int = 4, allow_equal: bool = False) -> np.ndarray:
    """Swap neighbours inside a layer wherever that removes crossings (dot's transpose step).

    Pairs that share no node and lie in layers of one parity are decided together, so one
    phase is a handful of vectorised operations whatever the number of layers. With
    ``allow_equal`` a pair that crosses also swaps when swapping crosses as much (dot's
    "reverse" pass), which walks across plateaus the strict rule cannot leave.
    """
    pos = pos.copy()
    n = len(pos)
    big = float(pos.max() + 2) if n else 1.0
    for _ in range(passes):
        swaps = 0
        for layer_parity in (0, 1):
            for pair_parity in (0, 1):
                seq = np.lexsort((pos, layer))
                first, second = seq[:-1], seq[1:]
                pick = ((layer[first] == layer[second]) & (layer[first] % 2 == layer_parity)
                        & (pos[first] % 2 == pair_parity))
                a, b = first[pick], second[pick]
                if len(a) == 0:
                    continue
                pair_of_a = np.full(n, -1)
                pair_of_b = np.full(n, -1)
                pair_of_a[a] = np.arange(len(a))
                pair_of_b[b] = np.arange(len(b))
                now, swapped = _pair_crossings(pos, src, dst, a, b, pair_of_a, pair_of_b, big)
                better = (swapped < now) | (allow_equal & (swapped == now) & (now > 0))
                pos[a[better]], pos[b[better]] = pos[b[better]], pos[a[better]].copy()
                swaps += int(better.sum())
        if swaps == 0 or allow_equal:
            break
    return pos


def reduce_crossings(pos: np.ndarray, layer: np.ndarray, src: np.ndarray, dst: np.ndarray,
                     rounds: int = 6, patience: int = 2) -> np.ndarray:
    """Median/barycenter sweeps down and up, each round polished by transposition.

    Returns the order with the fewest crossings seen; stops early after ``patience`` rounds
    in a row (a median and a barycenter round) found no better one.
    """
    pos = transpose(pos, layer, src, dst)
    best, best_crossings = pos, count_crossings(pos, layer, src, dst)
    since_better = 0
    for r in range(rounds):
        if best_crossings == 0 or since_better >= patience:
            break
        use_median = r % 2 == 0
        for downward in (True, False):
            for parity in (1, 0) if downward else (0, 1):
                pos = sweep(pos, layer, src, dst, parity, downward, use_median)
        pos = transpose(pos, layer, src, dst, allow_equal=r % 2 == 1)
        pos = transpose(pos, layer, src, dst)
        crossings = count_crossings(pos, layer, src, dst)
        since_better += 1
        if crossings < best_crossings:
            best, best_crossings, since_better = pos, crossings, 0
    return best
