"""Where the monitor's CPU time goes in one step, pass by pass (issue 26's breakdown).

    python bench/passes.py                  # the issue's MLP: 4x(Linear 256->256, ReLU) + Linear(256, 1)
    python bench/passes.py --width 1024     # the same shape, wider
    python bench/passes.py --adam           # the optimizer state of Adam (‖m‖, RMS √v̂, effective lr)

One torch thread; every pass timed by the training thread's own CPU time (``time.thread_time``,
which other processes' load moves least), all passes interleaved call by call, median of
``--calls``. The passes are those ``watch(model, opt)`` runs on a float32 CPU model each step:
the gradients' moments (min/max, scaled sums), their histogram edges, their exact histograms,
the weights' copy before the optimizer step and the update norms after it (update ratio), the
gradients' accumulated norms (the as-accumulated point), the optimizer state's figures (SGD
momentum, or Adam's with ``--adam``), the per-parameter records (``ParamStats``, ``Histogram``)
built from them, and spike detection's step on a run directory (a quiet step: no event).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gradexplorer.core.diagnose import spike_warmup  # noqa: E402
from gradexplorer.core.diagnose.spikes import SpikeDetector  # noqa: E402
from gradexplorer.core.stats.backends.numba import in_place as A  # noqa: E402
from gradexplorer.core.stats.backends.numba import kernels_in_place as KA  # noqa: E402
from gradexplorer.core.stats.backends.raw import MOMENT_COLUMNS  # noqa: E402
from gradexplorer.core.stats.backends.step_arrays import build_step_gradients  # noqa: E402
from gradexplorer.core.stats.optimizer_state import optimizer_state  # noqa: E402
from gradexplorer.core.steps.accumulated import grad_norms  # noqa: E402


def model_and_optimizer(width: int, adam: bool = False):
    torch.manual_seed(0)
    layers = []
    for _ in range(4):
        layers += [nn.Linear(width, width), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(width, 1))
    opt = torch.optim.Adam(model.parameters(), lr=0.01) if adam else \
        torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    nn.functional.mse_loss(model(torch.randn(64, width)), torch.randn(64, 1)).backward()
    opt.step()
    return model, opt


def passes(model, opt, bins: int = 64) -> dict[str, callable]:
    named = list(model.named_parameters())
    grads, params = [p.grad for _, p in named], [p.detach() for _, p in named]
    at = A.addresses_of(grads)
    moments = np.zeros((len(grads), MOMENT_COLUMNS))
    KA.moments_at(at.addresses, at.sizes, at.like, moments)
    edges, careful = A.step_edges(moments, bins, "auto")
    counts, extra = np.zeros((len(grads), bins), np.int64), np.zeros((len(grads), 4), np.int64)
    copies = A.UpdateCopies()
    copies.take(params)
    raw = A.compute_at(at, True, bins, "auto")
    raw.update = copies.update_norms(params)
    shapes = [(n, tuple(p.shape)) for n, p in named]
    record = build_step_gradients(1, shapes, [True] * len(shapes), raw, bins, "auto")
    detector, steps = SpikeDetector(), itertools.count(1)
    spike_warmup.ready()
    spike_warmup.wait()  # its kernels, not the numpy steps it takes until they are ready
    return {
        "moments (3 reads)": lambda: KA.moments_at(at.addresses, at.sizes, at.like, moments),
        "histogram edges": lambda: A.step_edges(moments, bins, "auto"),
        "histograms (1 read)": lambda: KA.histograms_at(at.addresses, at.sizes, at.like, edges, counts,
                                                        extra, careful),
        "all of compute_at": lambda: A.compute_at(A.addresses_of(grads), True, bins, "auto"),
        "weights' copy": lambda: copies.take(params),
        "update norms": lambda: copies.update_norms(params),
        "accumulated norms": lambda: grad_norms(grads),
        "optimizer state": lambda: optimizer_state(opt, named),
        "records": lambda: build_step_gradients(1, shapes, [True] * len(shapes), raw, bins, "auto"),
        "spike detection": lambda: detector.observe(next(steps), 1.0, record),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--adam", action="store_true", help="Adam instead of SGD with momentum")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model, opt = model_and_optimizer(args.width, args.adam)
    work = passes(model, opt)
    spent = {name: [] for name in work}
    for _ in range(args.calls):
        for name, fn in work.items():
            start = time.thread_time_ns()
            fn()
            spent[name].append(time.thread_time_ns() - start)
    numel = sum(p.numel() for p in model.parameters())
    print(f"MLP 4x{args.width} ({numel:,} numbers, {type(opt).__name__}), thread CPU per step, "
          f"median of {args.calls}:")
    for name, ns in spent.items():
        print(f"  {name:<22} {statistics.median(ns) / 1e3:8.1f} us")


if __name__ == "__main__":
    main()
