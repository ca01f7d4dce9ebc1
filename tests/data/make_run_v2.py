"""Writes ``tests/data/run_v2``: a run of format version 2, as gradexplorer wrote runs before
format 3, and ``expected.json``: what that gradexplorer's reader read from it.

Run with the gradexplorer of commit 8ce5592 (the last to write version 2), from its checkout:
``PYTHONPATH=<that checkout> python tests/data/make_run_v2.py``. The database is then made
small (512-byte pages, VACUUM); its tables and rows are as written.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import torch
from torch import nn

import gradexplorer as gx

HERE = Path(__file__).resolve().parent / "run_v2"


def write(path: Path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    model[2].bias.requires_grad_(False)  # a parameter without a gradient
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1, momentum=0.9)
    with gx.watch(model, opt, path, bins=8) as rec:
        for step in range(3):
            rec.note_batch([step])
            opt.zero_grad()
            loss = model(torch.randn(5, 3)).square().mean()
            loss.backward()
            rec.note_loss(loss)
            opt.step()


def histogram(h) -> list:
    return [h.edges.tolist(), h.counts.tolist(), int(h.nan_count), int(h.inf_count),
            int(h.below), int(h.above)]


def read(path: Path) -> dict:
    with gx.open_run(path) as run:
        history = getattr(gx, "runs", gx).RunHistory(run)  # gradexplorer.runs since issue 41
        steps = run.steps
        matrices = {}
        for name in run.parameters:
            m = history.histogram_matrix(name, history.histogram_steps())
            matrices[name] = [m.steps.tolist(), m.edges.tolist(), m.counts.tolist()]
        _, series = history.stat_series("norm", run.parameters)
        return {
            "version": run.meta("version"),
            "steps": steps,
            "step_info": {s: run.step_info(s) for s in steps},
            "figures": {s: run.figures(s) for s in steps},
            "histograms": {s: {n: histogram(h) for n, h in run.histograms(s).items()} for s in steps},
            "optimizer_state": {s: {n: v.state_dict() for n, v in run.optimizer_state(s).items()}
                                for s in steps},
            "batch_ids": {s: run.batch_ids(s) for s in steps},
            "norm_series": {n: v.tolist() for n, v in series.items()},
            "histogram_matrix": matrices,
        }


if __name__ == "__main__":
    shutil.rmtree(HERE, ignore_errors=True)
    write(HERE)
    expected = read(HERE)
    db = sqlite3.connect(HERE / "run.sqlite", isolation_level=None)
    db.execute("PRAGMA journal_mode=DELETE")
    db.execute("PRAGMA page_size=512")
    db.execute("VACUUM")
    db.close()
    assert json.dumps(read(HERE), sort_keys=True) == json.dumps(expected, sort_keys=True)
    (HERE / "expected.json").write_text(json.dumps(expected, sort_keys=True) + "\n")
