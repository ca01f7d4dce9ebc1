"""A run's parameter summaries (the report's largest norms and NaN/Inf steps) are the same
whether read from the summaries the writer folds every FOLD_EVERY steps plus the steps after
them, or from a pass over every row, and equal to the per-step reads — through NaN/Inf steps,
steps where a parameter had no gradient, a resumed run, and a summaries table that is not
whole."""

from __future__ import annotations

import math
import shutil
import sqlite3

import pytest
import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.core.runs import param_summaries as PS
from gradexplorer.core.runs.history import RunHistory
from tests.share_helpers import write_run


class TwoBranches(nn.Module):
    """``b`` takes part in odd steps only (no gradient on even ones)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 3), nn.Linear(4, 3)
        self.odd = True

    def forward(self, x):
        return self.a(x) + (self.b(x) if self.odd else 0)


def branch_run(path, steps: int, resume: bool = False, first: int = 1):
    torch.manual_seed(0)
    model = TwoBranches()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gx.watch(model, opt, path, bins=8, resume=resume) as rec:
        for step in range(first, first + steps):
            model.odd = step % 2 == 1
            x = torch.randn(8, 4, generator=torch.Generator().manual_seed(step))
            opt.zero_grad(set_to_none=True)
            loss = model(x).square().mean()
            loss.backward()
            if step == 4:
                model.a.weight.grad[0, 0] = float("nan")
            rec.note_loss(loss)
            opt.step()
            if step == 4:
                with torch.no_grad():
                    model.a.weight[0, 0] = 0.1
    return path


def per_step(run) -> dict[str, tuple]:
    """(steps with a gradient, largest finite norm and |g|, NaN/Inf steps, the first) from
    each step's own read."""
    out: dict[str, list] = {}
    for step in run.steps:
        for name, f in run.figures(step).items():
            if not f.get("has_grad", True) or f["norm"] is None:
                continue
            o = out.setdefault(name, [0, -math.inf, -math.inf, 0, None])
            o[0] += 1
            bad = bool(f["nan_count"] or f["inf_count"])
            if not math.isnan(f["norm"]):
                o[1] = max(o[1], f["norm"])
            if not math.isnan(f["abs_max"]):
                o[2] = max(o[2], f["abs_max"])
            if bad:
                o[3] += 1
                o[4] = step if o[4] is None else o[4]
    return {n: tuple(v) for n, v in out.items()}


def as_tuples(summaries) -> dict[str, tuple]:
    return {n: (s.steps, s.max_norm, s.max_abs, s.nonfinite_steps, s.first_nonfinite)
            for n, s in summaries.items()}


def whole_pass(path, tmp_path) -> dict[str, tuple]:
    """The summaries of a copy of the run whose summaries table was emptied."""
    copy = tmp_path / f"{path.name}-whole"
    shutil.copytree(path, copy)
    with sqlite3.connect(copy / "run.sqlite") as db:
        db.execute(f"DELETE FROM {PS.TABLE}")
    with gx.open_run(copy) as run:
        assert PS.kept_summaries(run) is None
        return as_tuples(RunHistory(run).parameter_summaries())


@pytest.mark.parametrize("fold_every", [2, 3])
def test_folded_summaries_are_the_whole_pass(tmp_path, monkeypatch, fold_every):
    monkeypatch.setattr(PS, "FOLD_EVERY", fold_every)
    runs = {"nan": write_run(tmp_path / "nan", steps=7, nan_at=3, bins=8),
            "branches": branch_run(tmp_path / "branches", steps=7)}
    for path in runs.values():
        with gx.open_run(path) as run:
            kept = PS.kept_summaries(run)
            assert kept is not None and kept[0] == 7 - 7 % fold_every  # folded as it was written
            got = as_tuples(RunHistory(run).parameter_summaries())
            assert got == per_step(run)
        assert got == whole_pass(path, tmp_path)
    with gx.open_run(runs["branches"]) as run:  # what the cases are about
        got = as_tuples(RunHistory(run).parameter_summaries())
        assert got["b.weight"][0] == 4 and got["a.weight"][0] == 7
        assert got["a.weight"][3:] == (1, 4)


def test_a_resumed_run_folds_the_steps_it_did_not_fold(tmp_path, monkeypatch):
    monkeypatch.setattr(PS, "FOLD_EVERY", 3)
    path = branch_run(tmp_path / "run", steps=4)  # folded through 3; step 4 after it
    branch_run(path, steps=5, resume=True, first=5)  # folds at 6 (steps 4..6) and 9
    with gx.open_run(path) as run:
        assert PS.kept_summaries(run)[0] == 9
        got = as_tuples(RunHistory(run).parameter_summaries())
        assert got == per_step(run)
    assert got == whole_pass(path, tmp_path)


def test_a_table_that_is_not_whole_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setattr(PS, "FOLD_EVERY", 2)
    path = write_run(tmp_path / "run", steps=6, nan_at=3, bins=8)
    with sqlite3.connect(path / "run.sqlite") as db:  # one row from another fold, a wrong max
        db.execute(f"UPDATE {PS.TABLE} SET through = 2, max_norm = 1e9 WHERE param = 1")
    with gx.open_run(path) as run:
        assert PS.kept_summaries(run) is None
        assert as_tuples(RunHistory(run).parameter_summaries()) == per_step(run)


def test_a_step_written_again_empties_the_table_for_good(tmp_path):
    path = write_run(tmp_path / "run", steps=3, bins=8)
    with sqlite3.connect(path / "run.sqlite") as db:
        folds = PS.SummaryFolds(db, lean=True)
        folds.after_step(db, PS.FOLD_EVERY)  # the fold of steps 1..3 (through FOLD_EVERY)
        assert db.execute(f"SELECT COUNT(*) FROM {PS.TABLE}").fetchone()[0] == 4
        folds.after_step(db, 2)
        folds.after_step(db, 3 * PS.FOLD_EVERY)
        assert db.execute(f"SELECT COUNT(*) FROM {PS.TABLE}").fetchone()[0] == 0
