"""Cost of ``gradexplorer.watch`` under tensor parallelism, per recorded step.

    python bench/tensor_parallel.py                      # TP on 2 ranks, FSDP x TP on 2 x 2
    python bench/tensor_parallel.py --layouts 2x2 --steps 20 --layers 4 --width 256

Gloo ranks on 127.0.0.1, on the CPU. A stack of transformer blocks (``Block``: sequence-parallel
norms, column-parallel q/k/v and MLP up, row-parallel o and MLP down: Megatron's layout,
``parallelize``), trained with ``clip_grad_norm_`` and SGD, bare and watched (every step
recorded, in memory), interleaved twice. Printed per layout: the median bare step; the median
watched step and its extra time; watch's time inside the step (its measure at the optimizer's
pre- and post-hooks: each rank's local figures, the two collectives and the combining) and,
within it, the collectives and combining alone, all per recorded step and as a share of the
bare step. Medians of rank 0's steps, by the wall clock (ranks wait on each other: a
collective's time is the slowest rank's) and by the training thread's CPU (``time.thread_time``,
one torch thread: unmoved by other processes' load, but blind to gloo's own threads).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

KEYS = ("measure", "collectives", "measure cpu", "collectives cpu")


class Block(nn.Module):
    """Pre-norm attention and MLP with residuals (the layout of a transformer layer); no bias on
    k (softmax ignores it: its gradient is rounding noise around 0)."""

    def __init__(self, width: int, heads: int, head: int, hidden: int) -> None:
        super().__init__()
        self.head = head
        self.norm = nn.LayerNorm(width)
        self.q = nn.Linear(width, heads * head)
        self.k = nn.Linear(width, heads * head, bias=False)
        self.v = nn.Linear(width, heads * head)
        self.o = nn.Linear(heads * head, width)
        self.mlp_norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, hidden)
        self.down = nn.Linear(hidden, width)

    def forward(self, x):
        h = self.norm(x)
        q, k, v = (self._heads(f(h)) for f in (self.q, self.k, self.v))
        att = torch.softmax(q @ k.transpose(-1, -2) / self.head ** 0.5, dim=-1) @ v
        x = x + self.o(att.transpose(1, 2).flatten(2))
        return x + self.down(torch.tanh(self.up(self.mlp_norm(x))))

    def _heads(self, t):  # (batch, seq, heads here × head) → (batch, heads here, seq, head)
        return t.unflatten(-1, (t.shape[-1] // self.head, self.head)).transpose(1, 2)


def parallelize(block: Block, tp_mesh) -> Block:
    """Megatron's layout: the norms sequence-parallel, q/k/v and up column-parallel, o and
    down row-parallel; the residual stream is sharded on the sequence between them (uneven
    hidden sizes: up's output stays a DTensor)."""
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )

    gathered = ColwiseParallel(input_layouts=Shard(1))
    return parallelize_module(block, tp_mesh, {
        "norm": SequenceParallel(), "mlp_norm": SequenceParallel(),
        "q": gathered, "k": gathered, "v": gathered,
        "o": RowwiseParallel(output_layouts=Shard(1)),
        "up": ColwiseParallel(input_layouts=Shard(1), use_local_output=False),
        "down": RowwiseParallel(output_layouts=Shard(1)),
    })


def blocks(args) -> nn.Sequential:
    """``args.layers`` blocks (MLP hidden 4 × width + 1: its shards are uneven)."""
    torch.manual_seed(0)
    return nn.Sequential(*(Block(args.width, args.heads, args.width // args.heads,
                                 4 * args.width + 1) for _ in range(args.layers)))


def build(args, mesh, dp: int) -> nn.Module:
    model = blocks(args)
    for block in model:
        parallelize(block, mesh["tp"])
    if dp > 1:
        from torch.distributed.fsdp import fully_shard

        for block in model:
            fully_shard(block, mesh=mesh["dp"])
        fully_shard(model, mesh=mesh["dp"])
    return model


def _rank(rank: int, world: int, dp: int, port: int, args) -> None:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    import gradexplorer as gx
    from gradexplorer.core.watch import sharded

    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    mesh = init_device_mesh("cpu", (dp, world // dp), mesh_dim_names=("dp", "tp"))
    d, t = mesh.get_coordinate()
    spent = dict.fromkeys(KEYS, 0.0)

    def timing(cls, method, key):
        original = getattr(cls, method)

        def timed(self, *a, **k):
            start, cpu = time.perf_counter(), time.thread_time()
            try:
                return original(self, *a, **k)
            finally:
                spent[key] += time.perf_counter() - start
                spent[key + " cpu"] += time.thread_time() - cpu
        setattr(cls, method, timed)

    for method in ("begin", "end"):
        timing(sharded.ShardedMeasure, method, "measure")
    timing(sharded.ShardedMeasure, "_reduce", "collectives")
    rows, cols = args.batch // dp, args.seq // (world // dp)
    steps, results = {}, {}
    for watched in (False, True, False, True):
        model = build(args, mesh, dp)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        rec = gx.watch(model, opt) if watched else None
        spent.update(dict.fromkeys(KEYS, 0.0))
        times, cpus = [], []
        for step in range(args.steps):
            g = torch.Generator().manual_seed(step)
            x = torch.randn(args.batch, args.seq, args.width, generator=g)
            x = x[d * rows:(d + 1) * rows, t * cols:(t + 1) * cols]
            dist.barrier()
            start, cpu = time.perf_counter(), time.thread_time()
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            times.append(time.perf_counter() - start)
            cpus.append(time.thread_time() - cpu)
        if rec is not None:
            rec.close()
            for key in spent:
                results.setdefault(key, []).append(spent[key] / args.steps)
        steps.setdefault(watched, []).extend(times[2:])
        steps.setdefault((watched, "cpu"), []).extend(cpus[2:])
    if rank == 0:
        numel = sum(p.numel() for p in blocks(args).parameters())
        med = {key: statistics.median(values) for key, values in (*steps.items(),
                                                                  *results.items())}
        bare, watched = med[False], med[True]
        layout = f"TP on {world} ranks" if dp == 1 else f"FSDP x TP on {dp} x {world // dp}"
        print(f"{layout}, {args.layers} blocks of width {args.width} ({numel / 1e6:.2f}M numbers), "
              f"per recorded step:\n  wall: bare step {bare * 1e3:.1f} ms, watched "
              f"{watched * 1e3:.1f} ms ({watched / bare - 1:+.1%}); watch's measure "
              f"{med['measure'] * 1e3:.2f} ms ({med['measure'] / bare:.1%} of the bare step), of "
              f"which collectives and combining {med['collectives'] * 1e3:.2f} ms "
              f"({med['collectives'] / bare:.1%})\n  training thread's CPU: bare step "
              f"{med[False, 'cpu'] * 1e3:.1f} ms, watch's measure {med['measure cpu'] * 1e3:.2f} ms "
              f"({med['measure cpu'] / med[False, 'cpu']:.1%}), of which collectives and "
              f"combining {med['collectives cpu'] * 1e3:.2f} ms "
              f"({med['collectives cpu'] / med[False, 'cpu']:.1%})", flush=True)
    dist.destroy_process_group()


def run(layout: str, args) -> None:
    import torch.multiprocessing as mp

    dp, tp = (int(n) for n in layout.split("x")) if "x" in layout else (1, int(layout))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_rank, args=(dp * tp, dp, port, args), nprocs=dp * tp, join=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layouts", default="2,2x2",
                        help="comma-separated: N (TP on N ranks) or DPxTP (default 2,2x2)")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=64)
    args = parser.parse_args(argv)
    for layout in args.layouts.split(","):
        run(layout, args)


if __name__ == "__main__":
    main()
