"""Workers for the gloo tests of watch under tensor parallelism (spawned by torch.multiprocessing):
the benchmark's transformer block (bench/tensor_parallel.py) at odd sizes, its norms
sequence-parallel (partial gradients), attention and MLP column/row-parallel (the MLP's 13
hidden units shard unevenly), trained with gradient clipping by each rank on its part of the
batch, or by one process on all of it."""

import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from tensor_parallel import Block, parallelize  # noqa: E402 - bench/tensor_parallel.py's block

STEPS = 3
BATCH, SEQ, WIDTH, HEADS, HEAD, HIDDEN = 4, 6, 7, 2, 5, 13
MAX_NORM = 0.05  # below the gradient's norm: every step is clipped


def make_model():
    torch.manual_seed(0)
    return Block(WIDTH, HEADS, HEAD, HIDDEN).double()


def batch(step):
    g = torch.Generator().manual_seed(step)
    return (torch.randn(BATCH, SEQ, WIDTH, generator=g, dtype=torch.float64),
            torch.randn(BATCH, SEQ, WIDTH, generator=g, dtype=torch.float64))


def train(model, opt, part=lambda t: t, share=1.0, dp_group=None):
    """STEPS clipped steps; each rank's loss is its ``part`` of the squared error over the
    elements of its data-parallel share of the batch (the ranks' backwards sum to the mean).
    ``dp_group``: data parallelism by hand, the gradients averaged over it after backward."""
    totals = []
    for step in range(STEPS):
        x, y = (part(t) for t in batch(step))
        opt.zero_grad()
        ((model(x) - y) ** 2).sum().div(BATCH * SEQ * WIDTH * share).backward()
        if dp_group is not None:
            for p in model.parameters():
                dist.all_reduce(p.grad.to_local(), group=dp_group)
                p.grad.to_local().div_(dist.get_world_size(dp_group))
        total = nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)
        totals.append(float(total.full_tensor() if hasattr(total, "full_tensor") else total))
        opt.step()
    return totals


def optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def single_process(run_dir, bins):
    import gradexplorer as gx

    model = make_model()
    opt = optimizer(model)
    with gx.watch(model, opt, run_dir, bins=bins):
        return train(model, opt)


def worker(rank, world, dp, run_dir, port, bins):
    """Train on a ``(dp, world // dp)`` mesh (TP alone when ``dp`` is 1), recording into
    ``run_dir``; rank 0 writes the total norms ``clip_grad_norm_`` returned beside it."""
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        from torch.distributed.device_mesh import init_device_mesh

        import gradexplorer as gx

        tp = world // dp
        mesh = init_device_mesh("cpu", (dp, tp), mesh_dim_names=("dp", "tp"))
        model = parallelize(make_model(), mesh["tp"])
        if dp > 1:
            from torch.distributed.fsdp import fully_shard

            for layer in (model.up, model.down):
                fully_shard(layer, mesh=mesh["dp"])
            fully_shard(model, mesh=mesh["dp"])
        d, t = mesh.get_coordinate()
        rows, cols = BATCH // dp, SEQ // tp

        def part(tensor):  # this rank's batch rows and sequence positions
            return tensor[d * rows:(d + 1) * rows, t * cols:(t + 1) * cols]

        opt = optimizer(model)
        lines = []
        with gx.Recorder(model, opt, run_dir, bins=bins, report=lines.append) as rec:
            totals = train(model, opt, part, 1 / dp)
            assert rec.plan.mode == ("fsdp2+tp" if dp > 1 else "tp"), rec.plan.mode
            assert rec.latest() is not None and not lines, lines  # every rank measures
        if rank == 0:
            with open(f"{run_dir}.totals.json", "w") as f:
                json.dump(totals, f)
        if dp == 1:
            every_other_step_of_two_backwards(mesh, part)
        else:  # TP on the mesh's tp half, a copy of it on each dp group: rank 0's copy counts
            model = parallelize(make_model(), mesh["tp"])
            opt = optimizer(model)
            with gx.Recorder(model, opt, f"{run_dir}-dp", bins=bins, report=lines.append) as rec:
                totals = train(model, opt, part, 1 / dp, mesh["dp"].get_group())
                assert rec.plan.mode == "tp" and not lines, (rec.plan.mode, lines)
            if rank == 0:
                with open(f"{run_dir}-dp.totals.json", "w") as f:
                    json.dump(totals, f)
    finally:
        dist.destroy_process_group()


def every_other_step_of_two_backwards(mesh, part):
    """``stats_every=2`` and two micro-batches a step: every rank records the same steps (its
    collectives meet the others'), and a recorded step's accumulated norm and clip coefficient
    are those ``clip_grad_norm_`` found after both backwards."""
    import gradexplorer as gx

    model = parallelize(make_model(), mesh["tp"])
    opt, lines = optimizer(model), []
    with gx.Recorder(model, opt, stats_every=2, report=lines.append) as rec:
        for step in range(4):
            x, y = (part(t) for t in batch(step))
            opt.zero_grad()
            for half in (slice(0, BATCH // 2), slice(BATCH // 2, BATCH)):
                ((model(x[half]) - y[half]) ** 2).sum().div(BATCH * SEQ * WIDTH).backward()
            total = nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM).full_tensor().item()
            opt.step()
            ledger = rec.ledger
            if step % 2 == 0:  # not recorded: the ledger is the last recorded step's
                assert (ledger is None) if step == 0 else ledger.optimizer_step == step, ledger
                continue
            assert ledger.optimizer_step == step + 1 and ledger.micro_batches == 2, ledger
            assert ledger.clipped and abs(ledger.grad_norm_accumulated - total) <= 1e-12 * total, \
                (ledger, total)
            assert abs(ledger.clip_coef - MAX_NORM / (total + 1e-6)) <= 1e-9, (ledger, total)
    assert not lines, lines
