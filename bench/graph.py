"""Benchmark: backward-graph extraction and layout, against torchviz's walk and Graphviz dot.

    python bench/graph.py                     # ~100, 1k, 10k, 13k and 50k nodes
    python bench/graph.py --sizes 100,1000 --dot-timeout 60 --repeat 3

Graphs come from ``example:deep:blocks=N`` (about 6 nodes per block). For each size it
reports CPU seconds (best of --repeat) of: extraction (ours; torchviz's recursive
``make_dot`` when installed; the same recursive walk inlined), our layered layout, and
Graphviz ``dot -Tplain`` where the binary exists (skipped past --dot-timeout); the edge
crossings of both drawings, counted the same way; and the peak Python memory of extraction
plus layout.
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gradexplorer.core.graph.attribution import ModuleAttribution  # noqa: E402
from gradexplorer.core.graph.extract import extract_graph  # noqa: E402
from gradexplorer.core.graph.layout.crossings import count_inversions  # noqa: E402
from gradexplorer.core.graph.layout.positions import layered_drawing  # noqa: E402
from gradexplorer.core.graph.style import node_label  # noqa: E402
from gradexplorer.core.model.spec import ModelOptions, load_workload  # noqa: E402

NODES_PER_BLOCK = 6


def best_of(repeat: int, fn):
    """Least CPU time of ``repeat`` runs and the last result.

    CPU time rather than wall time: on a shared machine wall time mostly measures the
    neighbours. (Single-threaded code: torch runs with one thread here.)
    """
    times, result = [], None
    for _ in range(repeat):
        t0 = time.process_time()
        result = fn()
        times.append(time.process_time() - t0)
    return min(times), result


def recursive_walk(loss: torch.Tensor, params: dict) -> int:
    """torchviz's ``add_nodes``, inlined: recursion over ``next_functions``."""
    param_map = {id(v): k for k, v in params.items()}
    seen: set = set()
    labels: dict = {}

    def add_nodes(fn):
        if fn in seen:
            return
        seen.add(fn)
        if hasattr(fn, "variable"):
            labels[id(fn.variable)] = param_map.get(id(fn.variable), "")
        labels[id(fn)] = type(fn).__name__
        for u in fn.next_functions:
            if u[0] is not None:
                add_nodes(u[0])

    add_nodes(loss.grad_fn)
    return len(seen)


def torchviz_make_dot(loss: torch.Tensor, params: dict):
    import torchviz

    return torchviz.make_dot(loss, params=params)


def timed_or_error(repeat: int, fn) -> str:
    try:
        seconds, _ = best_of(repeat, fn)
    except RecursionError:
        return "RecursionError"
    return f"{seconds:.3f}"


def dot_source(G, path: Path) -> None:
    with path.open("w") as f:
        f.write('digraph G {\nnode [shape=box, fontname="monospace", fontsize=10];\n')
        for v, attrs in G.nodes(data=True):
            f.write(f'n{v} [label="{node_label(attrs)}"];\n')
        for u, v in G.edges:
            f.write(f"n{u} -> n{v};\n")
        f.write("}\n")


def run_dot(G, timeout: float) -> tuple[float | None, dict, dict]:
    """Lay ``G`` out with ``dot -Tplain``: (CPU seconds or None, node positions, edge polylines)."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "g.dot"
        dot_source(G, src)
        t0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        try:
            out = subprocess.run(["dot", "-Tplain", str(src)], capture_output=True, text=True,
                                 timeout=timeout, check=True).stdout
        except (subprocess.TimeoutExpired, subprocess.CalledProcessError):
            return None, {}, {}
        t1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        seconds = (t1.ru_utime + t1.ru_stime) - (t0.ru_utime + t0.ru_stime)
    nodes, edges = {}, {}
    for line in out.splitlines():
        parts = shlex.split(line)
        if parts and parts[0] == "node":
            nodes[int(parts[1][1:])] = (float(parts[2]), -float(parts[3]))
        elif parts and parts[0] == "edge":
            k = int(parts[3])
            pts = [(float(parts[4 + 2 * i]), -float(parts[5 + 2 * i])) for i in range(k)]
            edges[(int(parts[1][1:]), int(parts[2][1:]))] = bezier_points(pts)
    return seconds, nodes, edges


def bezier_points(ctrl: list, samples: int = 8) -> list:
    """Points along a piecewise cubic Bezier given by its 3k+1 control points."""
    out = [ctrl[0]]
    t = np.linspace(0, 1, samples + 1)[1:, None]
    for i in range(0, len(ctrl) - 3, 3):
        p0, p1, p2, p3 = (np.array(c) for c in ctrl[i:i + 4])
        pts = (1 - t) ** 3 * p0 + 3 * (1 - t) ** 2 * t * p1 + 3 * (1 - t) * t**2 * p2 + t**3 * p3
        out.extend(map(tuple, pts))
    return out


def band_crossings(positions: dict, polylines: dict) -> int:
    """Crossings between consecutive node rows, counted the same way for any layered drawing.

    Rows are the distinct node y values. Each edge is followed from its tail's centre along
    its drawn path to its head's centre; where two edges both span the band between two
    rows, they cross when their order at the top differs from their order at the bottom.
    """
    levels = np.unique(np.round([p[1] for p in positions.values()], 3))
    rows, tops, bots = [], [], []
    for (u, v), path in polylines.items():
        pts = np.array([positions[u], *path, positions[v]])
        ys, xs = pts[:, 1], pts[:, 0]
        if ys[0] > ys[-1]:
            ys, xs = ys[::-1], xs[::-1]
        idx = np.searchsorted(levels, np.round([ys[0], ys[-1]], 3))
        if idx[1] - idx[0] < 1:
            continue
        at = levels[idx[0]:idx[1] + 1]
        order = np.argsort(ys, kind="stable")
        xs_at = np.interp(at, ys[order], xs[order])
        xs_at[0], xs_at[-1] = xs[0], xs[-1]
        rows.extend(range(idx[0], idx[1]))
        tops.extend(xs_at[:-1])
        bots.extend(xs_at[1:])
    if not rows:
        return 0
    rows, tops, bots = np.array(rows), np.array(tops), np.array(bots)
    bot_rank = np.unique(bots, return_inverse=True)[1].ravel()
    order = np.lexsort((bot_rank, tops, rows))
    seq = rows[order] * (int(bot_rank.max()) + 1) + bot_rank[order]
    return count_inversions(seq)


def measure(blocks: int, repeat: int, dot_timeout: float, with_dot: bool) -> dict:
    workload = load_workload(f"example:deep:blocks={blocks}", ModelOptions())
    model = workload.model
    inputs, target = workload.make_batch(0)
    with ModuleAttribution(model) as attribution:
        loss = workload.loss_fn(model(inputs), target)
    params = dict(model.named_parameters())
    extract_s, G = best_of(repeat, lambda: extract_graph(loss, model, attribution))
    layout_s, drawing = best_of(repeat, lambda: layered_drawing(G))
    row = {
        "nodes": G.number_of_nodes(), "edges": G.number_of_edges(),
        "extract_s": f"{extract_s:.3f}", "layout_s": f"{layout_s:.3f}",
        "recursive_walk_s": timed_or_error(repeat, lambda: recursive_walk(loss, params)),
        "torchviz_s": "n/a", "dot_s": "n/a", "dot_crossings": "n/a",
    }
    try:
        import torchviz  # noqa: F401

        row["torchviz_s"] = timed_or_error(1, lambda: torchviz_make_dot(loss, params))
    except ImportError:
        pass
    ours = {e: drawing.edge_points.get(e, []) for e in G.edges}
    row["crossings"] = band_crossings(drawing.positions, ours)
    row["memory_mb"] = f"{peak_memory(loss, model, attribution) / 1e6:.1f}"
    if with_dot:
        seconds, dot_nodes, dot_edges = run_dot(G, dot_timeout)
        if seconds is None:
            row["dot_s"] = f">{dot_timeout:g}"
        else:
            row["dot_s"] = f"{seconds:.2f}"
            row["dot_crossings"] = band_crossings(dot_nodes, dot_edges)
    return row


def peak_memory(loss, model, attribution) -> int:
    """Peak Python allocation while extracting and laying out (the graph stays alive)."""
    tracemalloc.start()
    G = extract_graph(loss, model, attribution)
    layered_drawing(G)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


COLUMNS = ("nodes", "edges", "extract_s", "recursive_walk_s", "torchviz_s", "layout_s",
           "dot_s", "crossings", "dot_crossings", "memory_mb")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000,13000,50000", help="approximate node counts")
    parser.add_argument("--repeat", type=int, default=3, help="runs per timing (best is kept)")
    parser.add_argument("--dot-timeout", type=float, default=120.0, help="seconds before dot is skipped")
    parser.add_argument("--dot-max-nodes", type=int, default=12000, help="larger graphs skip dot")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    have_dot = shutil.which("dot") is not None
    if not have_dot:
        print("(graphviz `dot` not found: its columns are n/a)", file=sys.stderr)
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for size in (int(s) for s in args.sizes.split(",")):
        blocks = max(1, round((size - 9) / NODES_PER_BLOCK))
        row = measure(blocks, args.repeat, args.dot_timeout, have_dot and size <= args.dot_max_nodes)
        print("| " + " | ".join(str(row[c]) for c in COLUMNS) + " |", flush=True)
    print(f"\n{os.cpu_count()} CPUs, torch {torch.__version__}, best of {args.repeat}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
