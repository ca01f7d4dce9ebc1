"""Workers for the 2-rank gloo tests of the noise scale under DDP (tests/test_noise_ranks.py),
forked from the tests' forkserver: each rank trains its shard of every step's batch, in ``m``
micro-batches (``no_sync`` but the last), under ``watch``."""

import contextlib
import os

import torch
import torch.distributed as dist
from distributed_helpers import make_model
from torch import nn

STEPS, B = 3, 3  # B: samples a micro-batch
# name: (micro-batches a rank, DDP's keyword arguments, watch's stats_every)
CONFIGS = {"ranks": (1, {}, 1), "both": (2, {"gradient_as_bucket_view": True}, 1),
           "every2": (2, {}, 2)}


def data(step, world, m):
    """The step's whole batch: ``world · m`` micro-batches of ``B`` samples, float64."""
    g = torch.Generator().manual_seed(100 + step)
    n = world * m * B
    return (torch.randn(n, 6, generator=g, dtype=torch.float64),
            torch.randn(n, 3, generator=g, dtype=torch.float64))


def micro_batch(x, y, rank, i, m):
    """Rank ``rank``'s micro-batch ``i``: its shard of ``m·B`` rows, then ``B`` of them."""
    at = (rank * m + i) * B
    return x[at:at + B], y[at:at + B]


def worker(rank, world, root, port, names):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        for name in names:
            train(rank, world, os.path.join(root, name), *CONFIGS[name])
    finally:
        dist.destroy_process_group()


def train(rank, world, run_dir, m, ddp_args, stats_every):
    from torch.nn.parallel import DistributedDataParallel

    import gradexplorer as gx

    model = DistributedDataParallel(make_model(), **ddp_args)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    lines = []
    with gx.Recorder(model, opt, run_dir, stats_every=stats_every, report=lines.append) as rec:
        for step in range(STEPS):
            x, y = data(step, world, m)
            opt.zero_grad()
            for i in range(m):
                with model.no_sync() if i < m - 1 else contextlib.nullcontext():
                    xs, ys = micro_batch(x, y, rank, i, m)
                    (nn.functional.mse_loss(model(xs), ys) / m).backward()
            opt.step()
            latest = rec.noise.latest
            recorded = (step + 1) % stats_every == 0
            fresh = latest is not None and latest.step == step + 1
            assert fresh == (rank == 0 and recorded), (rank, step, latest)
            if latest is not None:
                assert (latest.parts, latest.batch, latest.ranks) == (world * m, B, world)
    assert lines == [], lines
