"""Workers for the 2-rank gloo tests of gradexplorer.watch (spawned by torch.multiprocessing)."""

import os

import torch
import torch.distributed as dist
from torch import nn

STEPS = 3
BATCH = 8


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 9), nn.Tanh(), nn.Linear(9, 3)).double()


def batch(step, rank=None, world=1):
    g = torch.Generator().manual_seed(step)
    x = torch.randn(BATCH, 6, generator=g, dtype=torch.float64)
    y = torch.randn(BATCH, 3, generator=g, dtype=torch.float64)
    if rank is None:
        return x, y
    part = BATCH // world
    return x[rank * part:(rank + 1) * part], y[rank * part:(rank + 1) * part]


def train(model, opt, rank=None, world=1):
    for step in range(STEPS):
        x, y = batch(step, rank, world)
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()


def single_process(run_dir, bins):
    import gradexplorer as gx

    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    with gx.watch(model, opt, run_dir, bins=bins):
        train(model, opt)


def worker(rank, world, modes, run_dir, port, bins):
    """Train under each of ``modes`` in turn, recording into ``run_dir/<mode>``."""
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        for mode in modes:
            if mode == "skew":
                out_of_step(rank, world)
            elif mode == "per-rank":
                per_rank(rank, world, os.path.join(run_dir, mode), bins)
            else:
                record(rank, world, mode, os.path.join(run_dir, mode), bins)
    finally:
        dist.destroy_process_group()


def shard(model, world):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (world,))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def out_of_step(rank, world):
    """Rank 1 believes it is one step ahead: both ranks stop recording, neither hangs."""
    import gradexplorer as gx

    model = shard(make_model(), world)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    lines = []
    rec = gx.Recorder(model, opt, auto_steps=False, report=lines.append)
    rec.step_count = rank
    for step in range(2):
        x, y = batch(step, rank, world)
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        rec.before_optimizer_step()
        opt.step()
        rec.after_optimizer_step()
    rec.close()
    assert len(lines) == 1 and "different steps" in lines[0], lines
    assert rec.latest() is None


def per_rank(rank, world, run_dir, bins):
    """DDP with per-rank norms; the last step skips DDP's averaging (no_sync)."""
    from torch.nn.parallel import DistributedDataParallel

    import gradexplorer as gx

    model = DistributedDataParallel(make_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gx.watch(model, opt, run_dir, bins=bins, per_rank=True) as rec:
        for step in range(STEPS):
            x, y = batch(step, rank, world)
            opt.zero_grad()
            if step == STEPS - 1:
                with model.no_sync():
                    nn.functional.mse_loss(model(x), y).backward()
            else:
                nn.functional.mse_loss(model(x), y).backward()
            opt.step()
        assert rec.latest() is not None  # every rank measures when per-rank figures are on


def record(rank, world, mode, run_dir, bins):
    import gradexplorer as gx

    model = make_model()
    if mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(model)
    else:
        model = shard(model, world)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    with gx.watch(model, opt, run_dir, bins=bins) as rec:
        train(model, opt, rank, world)
        assert rec.plan.writes == (rank == 0) and rec.plan.mode == mode
        assert (rec.latest() is not None) == (rank == 0 or mode == "fsdp2")
