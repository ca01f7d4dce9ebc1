"""Benchmark: tracing the backward graph with source lines against without, on GPT-2 small.

    python bench/graph_sources.py                 # GPT-2 small (transformers, from a config)
    python bench/graph_sources.py --tokens 64 --repeat 5

Builds ``GPT2LMHeadModel(GPT2Config())`` (124M parameters, random weights: no download),
traces it with ``gradexplorer.trace`` on ``input_ids=`` and ``labels=`` with and without
``sources``, alternating, and prints the least CPU seconds of each and their ratio beside
the target (issue 34: at most 1.5×), and how many op nodes got a source line.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gradexplorer.core.graph.extract import trace  # noqa: E402

TARGET = 1.5


def gpt2_small():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config()).eval()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=128, help="sequence length (default 128)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each, best kept (default 3)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    model = gpt2_small()
    ids = torch.randint(0, model.config.vocab_size, (1, args.tokens))
    inputs = {"input_ids": ids, "labels": ids}
    best = {False: float("inf"), True: float("inf")}
    graph = None
    for _ in range(args.repeat):
        for sources in (False, True):
            t0 = time.process_time()
            G = trace(model, inputs, sources=sources)
            best[sources] = min(best[sources], time.process_time() - t0)
            graph = G if sources else graph
            del G
    ops = [a for _, a in graph.nodes(data=True) if a["kind"] in ("op", "loss")]
    located = sum("source" in a for a in ops)
    ratio = best[True] / best[False]
    print(f"GPT-2 small, {args.tokens} tokens, {graph.number_of_nodes():,} nodes; "
          f"{located:,} of {len(ops):,} ops have a source line")
    print(f"trace without sources {best[False]:.3f} s CPU, with sources {best[True]:.3f} s CPU: "
          f"{ratio:.2f}x (target <= {TARGET}x) {'ok' if ratio <= TARGET else 'OVER'}")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
