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
            if name == "unsynced":
                unsynced(rank)
            else:
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


def unsynced(rank):
    """Step 2 entirely under ``no_sync`` (.grad is each rank's own, not the mean): no figures and
    one line on rank 0; its sums are not carried into step 3, whose figures are its own."""
    from torch.nn.parallel import DistributedDataParallel

    import gradexplorer as gx

    model = DistributedDataParallel(make_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    lines, steps = [], []
    with gx.Recorder(model, opt, report=lines.append) as rec:
        for step in range(3):
            x, y = data(step, 2, 1)
            opt.zero_grad()
            with model.no_sync() if step == 1 else contextlib.nullcontext():
                nn.functional.mse_loss(model(*micro_batch(x, y, rank, 0, 1)[:1]),
                                       micro_batch(x, y, rank, 0, 1)[1]).backward()
            opt.step()
            steps.append(None if rec.noise.latest is None else rec.noise.latest.step)
        if rank == 0:
            assert steps == [1, None, 3] and rec.noise.latest.parts == 2, steps
            assert lines == ["gradexplorer: no noise scale at step 2: no backward of it "
                             "synchronised the ranks (no_sync to the end) (said once)"], lines
        else:
            assert steps == [None] * 3 and lines == [], (steps, lines)
