"""Steps waiting together are written together (one encoding of their histograms, one
``executemany`` a table: ``RunWriter.StepWrite``), and read back exactly as steps written one
transaction each: every figure, NaN apart from no value, every histogram bit for bit. A group
whose write fails is done again write by write: those before the failing one are committed,
it and those after are not."""

import math
import sqlite3
import threading

import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.core.runs import write_thread as W
from gradexplorer.core.runs.writer import RunWriter


def _train(run_dir, steps: int, hold: bool):
    """``steps`` steps of a model whose gradients hold a NaN and an Inf from step 3 and whose
    last layer has no gradient at step 2, written with the writer thread held back (``hold``:
    every step waits, then all go in one transaction) or flushed after each step."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3), nn.Linear(3, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rec = gx.watch(model, opt, run_dir, bins=16)
    gate = threading.Event()
    if hold:
        rec.writer._writes.submit("hold", lambda db: gate.wait() and None)
    for step in range(1, steps + 1):
        opt.zero_grad()
        model(torch.randn(7, 6)).square().sum().backward()
        if step == 2:
            model[3].weight.grad = None
        if step >= 3:
            model[0].bias.grad[1] = math.nan
            model[2].weight.grad[0, 0] = math.inf
        opt.step()
        if not hold:
            rec.writer.flush()
    gate.set()
    rec.close()
    return gx.open_run(run_dir)


def _same(a, b) -> bool:
    return repr(a) == repr(b)  # NaN as NaN, None as None, ints as ints


def test_steps_written_together_read_back_as_steps_written_alone(tmp_path, monkeypatch):
    groups = []
    together = RunWriter._insert_steps

    def counted(self, db, writes):
        groups.append(len(writes))
        return together(self, db, writes)

    monkeypatch.setattr(RunWriter, "_insert_steps", counted)
    apart = _train(tmp_path / "apart", 5, hold=False)
    assert groups == [1] * 5
    groups.clear()
    joined = _train(tmp_path / "joined", 5, hold=True)
    assert sum(groups) == 5 and groups[0] >= 3  # steps 1-3 in one call (a NaN step's spike
    # event, a write of its own, comes between the later ones)
    assert joined.steps == apart.steps == [1, 2, 3, 4, 5]
    for step in joined.steps:
        a, b = apart.figures(step), joined.figures(step)
        assert list(a) == list(b) and _same(a, b)
        assert _same(apart.optimizer_state(step), joined.optimizer_state(step))
        assert _same(apart.step_ledger(step), joined.step_ledger(step))
        assert _same(apart.stats(step), joined.stats(step))
        found, wanted = joined.histograms(step), apart.histograms(step)
        assert list(found) == list(wanted) and len(found) == (5 if step == 2 else 6)
        for name, h in wanted.items():
            assert found[name].edges.tobytes() == h.edges.tobytes()
            assert found[name].counts.tolist() == h.counts.tolist()
            assert (found[name].nan_count, found[name].inf_count, found[name].below,
                    found[name].above) == (h.nan_count, h.inf_count, h.below, h.above)
    stored = sqlite3.connect(tmp_path / "joined" / "run.sqlite").execute(
        "SELECT COUNT(*) FROM stat_rows WHERE mean = 'nan'").fetchone()[0]
    assert stored > 0  # NaN kept apart from no value, and read back as NaN
    assert any(math.isnan(f["mean"]) for f in joined.figures(5).values())
    assert "3.weight" not in joined.stats(2) and "3.weight" in joined.stats(3)


def test_a_failing_write_in_a_group_keeps_those_before_it(tmp_path):
    db = sqlite3.connect(tmp_path / "t.sqlite", isolation_level=None, check_same_thread=False)
    db.execute("CREATE TABLE t (x)")
    calls, errors = [], []

    class Row:
        def __init__(self, x):
            self.x = x

        def __call__(self, db):
            self.together(db, [self])

        @staticmethod
        def together(db, rows):
            calls.append([r.x for r in rows])
            db.executemany("INSERT INTO t VALUES (?)", [(1 / r.x,) for r in rows])

    writes = W.WriteThread(db, lambda what, exc: errors.append(what))
    gate = threading.Event()
    writes.submit("hold", lambda db: gate.wait() and None)
    for x in (1, 2, 0, 4):
        writes.submit(f"row {x}", Row(x))
    gate.set()
    writes.close()
    assert calls[0] == [1, 2, 0, 4]  # together first, then one by one to find the failing one
    assert calls[1:] == [[1], [2], [0]] and errors == ["row 0"]
    assert [r[0] for r in db.execute("SELECT x FROM t")] == [1.0, 0.5]
