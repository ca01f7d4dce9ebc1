"""A writer killed with SIGKILL mid-run leaves a run readable up to its last complete step, loses
at most the writes the writer thread had not committed (write_thread: CAPACITY + BATCH), and a
reader following the live run sees every step once, in order."""

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

import gradexplorer as gx
from gradexplorer.core.runs.write_thread import BATCH, CAPACITY

ROOT = Path(__file__).resolve().parents[1]

WRITER = textwrap.dedent("""
    import sys, torch
    from torch import nn
    import gradexplorer as gx
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    rec = gx.watch(model, opt, sys.argv[1], bins=32)
    rec.writer.flush()  # the run's first transaction committed: say so
    print("created", flush=True)
    step = 0
    while True:
        x = torch.randn(64, 32)
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
        step += 1
        print(step, flush=True)  # the step's figures are handed to the writer thread
""")


def open_when_created(run_dir, proc):
    """The run, once the writer says it has created it (its first transaction committed)."""
    line = proc.stdout.readline()  # blocks until the writer's line, or EOF if it died
    assert line.strip() == b"created", f"the writer did not start (exit {proc.poll()})"
    return gx.open_run(run_dir)


def test_kill_9_leaves_complete_steps_and_a_follower_sees_each_once(tmp_path):
    run_dir = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(run_dir)], env=env,
                            stdout=subprocess.PIPE)
    try:
        run = open_when_created(run_dir, proc)
        seen = []
        for step in run.follow(poll=0.01, timeout=120):
            seen.append(step)
            assert len(run.figures(step)) == 4  # a step is visible only when complete
            if len(seen) == 40:
                break
        while int(proc.stdout.readline()) < CAPACITY + BATCH + 100:  # more than it may lose
            pass
        os.kill(proc.pid, signal.SIGKILL)  # mid-run: the writer is busy with later steps
        proc.wait(timeout=30)
        printed = proc.stdout.read().decode().split("\n")[:-1]  # whole lines: steps handed over
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    assert seen == list(range(1, 41))
    after = gx.open_run(run_dir)
    steps = after.steps
    assert steps == list(range(1, len(steps) + 1)) and len(steps) >= 40
    handed = int(printed[-1]) if printed else CAPACITY + BATCH + 100
    assert handed - len(steps) <= CAPACITY + BATCH  # lost: only writes not yet committed
    last = steps[-1]
    stats = after.figures(last)
    assert set(stats) == {"0.weight", "0.bias", "2.weight", "2.bias"}
    for name in stats:
        edges, counts = after.histogram(last, name)
        assert len(edges) == 33 and counts.sum() == np.prod(
            {"0.weight": (64, 32), "0.bias": (64,), "2.weight": (10, 64), "2.bias": (10,)}[name])
    assert list(after.follow(poll=0.01, timeout=0.05, after=39)) == steps[39:]
