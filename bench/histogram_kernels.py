"""The exact histograms' kernel on ResNet-18's gradients, in read passes (issue 42): what the
statistics worker runs on its copy of a step's gradients (``kernels_in_place.histograms_at``).

    python bench/histogram_kernels.py               # 64 bins (watch's), 21 calls
    python bench/histogram_kernels.py --bins 128    # more than PAIR_BINS: one increment a value

The gradients of one step of bench/workloads.py's ResNet-18 (8×3×64×64, 11.7M float32 numbers
in 62 tensors), their edges as watch takes them (auto range); the counts checked against
``np.histogram`` with the same float64 edges first. One torch thread; each call timed by the
thread's CPU (``time.thread_time``), interleaved call by call with one plain read pass (numpy's
sum of every gradient: bench/histograms.py's yardstick, as bench/watch_floor.py's); medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import workloads as W  # noqa: E402

from gradexplorer.core.stats.backends.numba import in_place as A  # noqa: E402
from gradexplorer.core.stats.backends.numba import kernels_in_place as KA  # noqa: E402
from gradexplorer.core.stats.backends.raw import MOMENT_COLUMNS  # noqa: E402


def resnet18_gradients() -> list[torch.Tensor]:
    model, batch, loss_fn = W.build("resnet18")
    inputs, target = batch(1)
    W.loss_of(model, inputs, target, loss_fn).backward()
    return [p.grad for p in model.parameters()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bins", type=int, default=64)
    parser.add_argument("--calls", type=int, default=21)
    args = parser.parse_args()
    torch.set_num_threads(1)
    grads = resnet18_gradients()
    at = A.addresses_of(grads)
    moments = np.zeros((len(grads), MOMENT_COLUMNS))
    KA.moments_at(at.addresses, at.sizes, at.like, moments)
    edges, careful = A.step_edges(moments, args.bins, "auto")
    counts, extra = np.zeros((len(grads), args.bins), np.int64), np.zeros((len(grads), 4), np.int64)

    def histograms() -> None:
        counts[:] = 0
        KA.histograms_at(at.addresses, at.sizes, at.like, edges, counts, extra, careful)

    histograms()
    for g, row, e in zip(grads, counts, edges, strict=True):
        assert np.array_equal(row, np.histogram(g.numpy().astype(np.float64), bins=e)[0])
    arrays = [g.numpy() for g in grads]
    spent: dict[str, list[float]] = {"histograms_at": [], "one read pass": []}
    for _ in range(args.calls):
        for name, fn in (("histograms_at", histograms), ("one read pass", lambda: [a.sum() for a in arrays])):
            start = time.thread_time()
            fn()
            spent[name].append(time.thread_time() - start)
    read = statistics.median(spent["one read pass"])
    load = os.getloadavg()[0]
    print(f"ResNet-18's gradients ({at.total:,} float32 numbers in {len(grads)} tensors), {args.bins} bins, "
          f"counts equal np.histogram; thread CPU, median of {args.calls} calls, load {load:.1f}:")
    for name, seconds in spent.items():
        median = statistics.median(seconds)
        print(f"  {name:<15} {median * 1e3:7.2f} ms  {median / read:5.2f} read passes")


if __name__ == "__main__":
    main()
