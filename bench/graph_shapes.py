"""Benchmark: layout time per 10k nodes whatever the graph's shape (target ≤ 1 s).

    python bench/graph_shapes.py            # chain, DenseNet-121/201, 2,500 summed heads
    python bench/graph_shapes.py --repeat 3

For each graph: nodes and edges, the proper layered graph's size (nodes + bend points), and
the CPU seconds (best of --repeat) of the app's route: the readable view (modules collapsed
to a depth that fits) and the layered layout of it, then the whole graph laid out uncollapsed;
each as seconds per 10k nodes beside the target.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gradexplorer.core.graph.collapse import readable_view  # noqa: E402
from gradexplorer.core.graph.extract import extract_graph  # noqa: E402
from gradexplorer.core.graph.layout.layered import add_dummies, assign_layers  # noqa: E402
from gradexplorer.core.graph.layout.positions import graph_arrays, layout_graph  # noqa: E402
from gradexplorer.core.model.spec import ModelOptions, load_workload  # noqa: E402

TARGET_S_PER_10K = 1.0


class SumOfHeads(nn.Module):
    """``heads`` linear heads summed one by one (a run of 5,000 parameters: 7,501 nodes)."""

    def __init__(self, heads: int) -> None:
        super().__init__()
        self.heads = nn.ModuleList(nn.Linear(4, 4) for _ in range(heads))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum(head(x) for head in self.heads)


def example_graph(spec: str):
    workload = load_workload(spec, ModelOptions())
    inputs, target = workload.make_batch(0)
    return extract_graph(workload.loss_fn(workload.model(inputs), target), workload.model)


def heads_graph(heads: int):
    model = SumOfHeads(heads)
    return extract_graph(model(torch.randn(2, 4)).sum(), model)


def best_cpu(repeat: int, fn) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return min(times)


def proper_size(G) -> int:
    nodes, src, dst = graph_arrays(G)
    layer, src, dst, _ = assign_layers(len(nodes), src, dst, [])
    return len(add_dummies(len(nodes), layer, src, dst)[0])


GRAPHS = {
    "chain (example:deep:blocks=2000)": lambda: example_graph("example:deep:blocks=2000"),
    "DenseNet-121 (example:dense)": lambda: example_graph("example:dense:size=8,batch=2"),
    "DenseNet-201 (example:dense:depth=201)": lambda: example_graph("example:dense:depth=201,size=8,batch=2"),
    "2,500 summed heads (5,000 parameters)": lambda: heads_graph(2500),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per timing (best is kept)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print("| graph | nodes | edges | with bend points | app route s | per 10k | whole graph s | per 10k "
          "| target per 10k |\n|---|---|---|---|---|---|---|---|---|")
    for name, make in GRAPHS.items():
        G = make()
        n = G.number_of_nodes()
        app = best_cpu(args.repeat, lambda G=G: layout_graph(readable_view(G)))
        whole = best_cpu(args.repeat, lambda G=G: layout_graph(G))
        print(f"| {name} | {n:,} | {G.number_of_edges():,} | {proper_size(G):,} | {app:.3f} | "
              f"{app * 1e4 / n:.3f} | {whole:.3f} | {whole * 1e4 / n:.3f} | ≤ {TARGET_S_PER_10K:g} |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
