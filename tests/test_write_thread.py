"""The run directory is written off the training thread: the SQLite work happens on the writer
thread, writes waiting are committed together, a full queue makes the training wait (nothing
dropped), close() returns once everything is on disk, and a failure there is one line."""

import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.core.runs import write_thread as W


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))


def train(model, opt, steps):
    for _ in range(steps):
        opt.zero_grad()
        model(torch.randn(4, 8)).square().mean().backward()
        opt.step()


def test_sql_runs_on_the_writer_thread_and_close_leaves_every_step(tmp_path):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    rec = gx.watch(model, opt, tmp_path / "run")
    threads = set()
    rec.writer._db.set_trace_callback(lambda sql: threads.add(threading.get_ident()))
    train(model, opt, 12)
    rec.close()  # drains: every step on disk once it returns
    assert threads and threading.get_ident() not in threads
    run = gx.open_run(tmp_path / "run")
    assert run.steps == list(range(1, 13)) and run.last_step == 12
    assert len(run.figures(12)) == 4


def test_waiting_writes_commit_together_and_a_full_queue_waits(tmp_path):
    db = sqlite3.connect(tmp_path / "t.sqlite", isolation_level=None, check_same_thread=False)
    db.execute("CREATE TABLE t (x)")
    commits, errors = [], []
    db.set_trace_callback(lambda sql: commits.append(sql) if sql == "COMMIT" else None)
    writes = W.WriteThread(db, lambda what, exc: errors.append(what))
    gate, started = threading.Event(), threading.Event()

    def hold(db):  # the writer is busy (a slow disk) until the gate opens
        started.set()
        gate.wait()
    writes.submit("hold", hold)
    started.wait()
    submitted = []

    def producer():
        for i in range(W.CAPACITY + 5):
            writes.submit(f"row {i}", lambda db, i=i: db.execute("INSERT INTO t VALUES (?)", (i,)))
            submitted.append(i)
    thread = threading.Thread(target=producer)
    thread.start()
    while len(submitted) < W.CAPACITY:  # the queue fills up, then the producer waits for room
        thread.join(0.01)
    thread.join(0.2)
    assert thread.is_alive() and len(submitted) == W.CAPACITY
    gate.set()
    thread.join()
    writes.close()
    rows = [r[0] for r in db.execute("SELECT x FROM t ORDER BY rowid")]
    assert rows == list(range(W.CAPACITY + 5)) and errors == []  # none dropped, in order
    assert len(commits) < W.CAPACITY  # the waiting rows went in batches, not one commit each


def test_a_failing_write_keeps_those_before_it_and_stops(tmp_path):
    db = sqlite3.connect(tmp_path / "t.sqlite", isolation_level=None, check_same_thread=False)
    db.execute("CREATE TABLE t (x)")
    errors = []
    writes = W.WriteThread(db, lambda what, exc: errors.append((what, str(exc))))
    gate = threading.Event()
    writes.submit("hold", lambda db: gate.wait() and None)
    writes.submit("row 1", lambda db: db.execute("INSERT INTO t VALUES (1)"))
    writes.submit("row 2", lambda db: db.execute("INSERT INTO nowhere VALUES (2)"))
    writes.submit("row 3", lambda db: db.execute("INSERT INTO t VALUES (3)"))
    gate.set()
    writes.flush()
    assert errors == [("row 2", "no such table: nowhere")]
    assert not writes.submit("row 4", lambda db: db.execute("INSERT INTO t VALUES (4)"))
    writes.close()
    assert [r[0] for r in db.execute("SELECT x FROM t")] == [1]


def test_a_script_that_never_closes_keeps_every_step(tmp_path):
    """The steps still queued when the interpreter exits are committed (atexit)."""
    script = textwrap.dedent("""
        import sys, torch
        from torch import nn
        import gradexplorer as gx
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        rec = gx.watch(model, opt, sys.argv[1])
        for _ in range(7):
            opt.zero_grad()
            model(torch.randn(4, 8)).square().mean().backward()
            opt.step()
    """)
    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "run")], check=True,
                   env={**os.environ, "PYTHONPATH": str(root)}, timeout=300)
    assert gx.open_run(tmp_path / "run").steps == list(range(1, 8))


def test_an_idle_writer_sleeps_until_a_write_comes_then_commits_it_within_a_period(tmp_path):
    """Nothing waiting: the writer is not woken every period (a slow loop's writer would spend
    CPU for nothing between its steps), and the next write is still committed by itself, in
    its period, without a flush; close() wakes it."""
    db = sqlite3.connect(tmp_path / "t.sqlite", isolation_level=None, check_same_thread=False)
    db.execute("CREATE TABLE t (x)")
    looks = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(W, "PERIOD", 0.002)
        writes = W.WriteThread(db, lambda what, exc: None)
        drain = writes._drain
        writes._drain = lambda: (looks.append(1), drain())[1]  # each look at the queue
        for i in range(3):
            writes.submit(f"row {i}", lambda db, i=i: db.execute("INSERT INTO t VALUES (?)", (i,)))
            done = threading.Event()
            writes.submit("done", lambda db, done=done: done.set())
            assert done.wait(30)  # committed in its period, no flush asked for
            looks.clear()
            threading.Event().wait(0.3)  # idle: ~150 periods
            assert len(looks) <= 1
        writes.close()
    assert [r[0] for r in db.execute("SELECT x FROM t ORDER BY rowid")] == [0, 1, 2]
