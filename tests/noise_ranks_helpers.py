"""Workers for the 2-rank gloo tests of the noise scale under DDP (tests/test_noise_ranks.py),
forked from the tests' forkserver: each rank trains its shard of every step's batch, in ``m``
micro-batches (``no_sync`` but the last), under ``watch`` (with ``noise_every``: on a cadence,
every rank asserting which steps had the capture's hooks and its reduce; ``RESUMED``: the run
recorded in two parts, the second a new recorder with ``resume=True`` in the same run_dir)."""

import contextlib
import os

import torch
import torch.distributed as dist
from distributed_helpers import make_model
from torch import nn

STEPS, B = 3, 3  # B: samples a micro-batch
# name: (micro-batches a rank, DDP's keyword arguments, watch's stats_every, noise_every, steps)
CONFIGS = {"ranks": (1, {}, 1, 1, STEPS), "both": (2, {"gradient_as_bucket_view": True}, 1, 1, STEPS),
           "every2": (2, {}, 2, 1, STEPS), "noise2": (2, {}, 1, 2, 5),
           "stats2noise3": (1, {}, 2, 3, 10), "auto": (2, {}, 1, "auto", 20),
           "resumed": (2, {}, 1, 1, 6), "resumed_stats2": (1, {}, 2, 1, 6),
           "resumed_noise2": (2, {}, 1, 2, 7), "resumed_counted": (2, {}, 2, 3, 11)}
# recorded in two parts: the first run's steps and its stats_every, then the rest resumed (rank 0
# alone reads the step the run's loop reached and its last noise-scale step: every rank's step
# numbers and cadence must still agree)
RESUMED = {"resumed": (3, 1), "resumed_stats2": (3, 1), "resumed_noise2": (3, 1),
           "resumed_counted": (5, 2)}
RANK0_DIR = {"resumed_stats2"}  # run_dir (and so the resumed run) given on rank 0 alone
# "auto"'s made-up CPU a step on each rank (``AutoClock``): the capture 11% of a 10 ms step on
# rank 0 (alone it would take N = 4), 17% on rank 1 (N = 6)
AUTO_COSTS = {0: 0.0011, 1: 0.0017}
# the steps with a noise scale: the recorded ones, or on a cadence one in N of them. "auto": 2
# (START) until 4 steps with the capture are each measured against the step before (step 11's
# end); each rank's proposal (4 and 6) goes in the next recorded step's reduce (13), the largest
# adopted at its end
ROWS = {"noise2": [1, 3, 5], "stats2noise3": [2, 6, 10], "auto": [1, 3, 5, 7, 9, 11, 13, 19],
        # resumed: steps 1-3 every step, then 4 and 6 (stats_every=2); on a cadence of 2 the
        # resumed recorder's counts on from the run's last step with a noise scale (3): 5, 7;
        # "resumed_counted": steps 1-5 recorded at 2 and 4 (the noise scale at 2), resumed at the
        # loop's step 6 (not 5, after the last recorded one): 6 and 10, 3 or more steps apart
        "resumed_stats2": [1, 2, 3, 4, 6], "resumed_noise2": [1, 3, 5, 7],
        "resumed_counted": [2, 6, 10]}
AUTO_CHANGES = [[13, 6]]


def rows_of(name):
    """The steps of ``name``'s run with a noise scale."""
    _, _, stats_every, _, steps = CONFIGS[name]
    return ROWS.get(name) or [s for s in range(1, steps + 1) if s % stats_every == 0]


class AutoClock:
    """A made-up CPU clock for "auto" (``NoiseCadence(clock=)``), moved by the loop: each step
    10 ms, plus the rank's capture cost where the step had the capture on (``advance``)."""

    def __init__(self, cost):
        self.cost, self.now = cost, 0.0

    def advance(self, captured: bool) -> None:
        self.now += 0.010 + (self.cost if captured else 0.0)

    def __call__(self):
        return self.now


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
                train(rank, world, os.path.join(root, name), name)
    finally:
        dist.destroy_process_group()


def train(rank, world, run_dir, name):
    from torch.nn.parallel import DistributedDataParallel

    m, ddp_args, stats_every, noise_every, steps = CONFIGS[name]
    model = DistributedDataParallel(make_model(), **ddp_args)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    lines, reduced, hooked = [], [], []
    first, first_every = RESUMED.get(name, (0, stats_every))
    for start, end, every in ((0, first, first_every), (first, steps, stats_every)):
        if start < end:
            cadence = record(rank, world, run_dir, name, model, opt, range(start, end), every,
                             (lines, reduced, hooked))
    assert lines == [], lines
    # every rank: one reduce, and on a cadence the hooks on, on exactly the steps with figures
    assert reduced == rows_of(name) and (cadence is None or hooked == reduced), \
        (rank, hooked, reduced)
    if noise_every == "auto":  # the ranks' largest proposal, adopted alike on every rank
        assert cadence.changes == AUTO_CHANGES and cadence.every == 6, (rank, cadence.changes)


def record(rank, world, run_dir, name, model, opt, steps, stats_every, seen):
    """``steps`` of ``name``'s training under one recorder (resumed after a first one's): its
    lines, the steps it reduced on and those with the capture's hooks on added to ``seen``."""
    import gradexplorer as gx

    m, _, _, noise_every, _ = CONFIGS[name]
    lines, reduced, hooked = seen
    given = None if name in RANK0_DIR and rank != 0 else run_dir  # as loops often write
    with gx.Recorder(model, opt, given, stats_every=stats_every, report=lines.append,
                     noise_every=noise_every, resume=steps.start > 0) as rec:
        capture, cadence = rec.noise.capture, rec.noise.cadence
        send = capture._send
        capture._send = lambda step: (reduced.append(step), send(step))  # its reduces, counted
        clock = AutoClock(AUTO_COSTS[rank]) if noise_every == "auto" else None
        if clock is not None:
            cadence.clock = clock
        for step in steps:
            x, y = data(step, world, m)
            opt.zero_grad()
            for i in range(m):
                with model.no_sync() if i < m - 1 else contextlib.nullcontext():
                    xs, ys = micro_batch(x, y, rank, i, m)
                    loss = nn.functional.mse_loss(model(xs), ys) / m
                    if i == 0 and capture._handles:  # the capture's hooks, on for this step
                        hooked.append(step + 1)
                    loss.backward()
            opt.step()
            if clock is not None:  # the step's CPU, read at the next step's first forward
                clock.advance(bool(hooked) and hooked[-1] == step + 1)
            latest = rec.noise.latest
            fresh = latest is not None and latest.step == step + 1
            assert fresh == (rank == 0 and step + 1 in rows_of(name)), (rank, step, latest)
            if latest is not None:
                assert (latest.parts, latest.batch, latest.ranks) == (world * m, B, world)
    return cadence


def unsynced(rank):
    """Step 2 entirely under ``no_sync`` (.grad is each rank's own, not the mean): no figures and
    one line on rank 0; its sums are not carried into step 3, whose figures are its own."""
    from torch.nn.parallel import DistributedDataParallel

    import gradexplorer as gx

    model = DistributedDataParallel(make_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    lines, steps = [], []
    with gx.Recorder(model, opt, report=lines.append, noise_every=1) as rec:  # (every step)
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
