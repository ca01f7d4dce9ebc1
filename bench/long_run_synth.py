"""A long run written fast: ``synth_run(path, steps, params, hist_every)``.

The first ``BLOCK`` steps are written by the recorder's own ``RunWriter`` (figures, 64-bin
histograms every ``hist_every`` steps, the step ledger with a skipped and a clipped step, a
NaN gradient, accumulated norms), as ``gradexplorer.watch`` writes them; the rest of the run
is those rows copied forward by SQL, ``BLOCK`` steps at a time with shifted step numbers and
wall times, and the parameters' summaries folded every ``FOLD_EVERY`` steps as the writer folds
them (a valid run ``open_run`` accepts, written in seconds instead of hours).
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gradexplorer.core.runs.param_summaries import SummaryFolds  # noqa: E402
from gradexplorer.core.runs.schema import LEAN_TABLES, SUMMARIES_TABLE  # noqa: E402
from gradexplorer.core.runs.writer import RunWriter  # noqa: E402
from gradexplorer.core.stats.records import Histogram, ParamStats, StepGradients  # noqa: E402
from gradexplorer.core.steps.ledger import StepLedger  # noqa: E402

BLOCK = 100  # steps written by the writer; a multiple of every ``hist_every`` used here
COPIED = ("steps", *LEAN_TABLES.values(), "ledger")  # format 3: the tables under the views


def _first_block(path: Path, params: int, bins: int, hist_every: int, steps: int) -> None:
    rng = np.random.default_rng(0)
    names = [(f"layers.{i // 2}.{'weight' if i % 2 == 0 else 'bias'}", [32, 32] if i % 2 == 0 else [32])
             for i in range(params)]
    writer = RunWriter(path, overwrite=True)
    writer.set_meta({
        "structure": {"model": "SyntheticMLP", "parameters": [
            {"name": n, "shape": s, "numel": int(np.prod(s)), "dtype": "float32", "requires_grad": True}
            for n, s in names], "modules": []},
        "settings": {"every": 1, "bins": bins, "hist_every": hist_every},
    })
    for step in range(1, steps + 1):
        decay = 0.05 + 1.0 / (1 + step / 50)
        records, hists, total = {}, {}, 0.0
        for j, (name, shape) in enumerate(names):
            numel = int(np.prod(shape))
            std = float((1 + j % 3) * decay * (1 + 0.1 * rng.standard_normal()))
            nan = 2 if (step % BLOCK == 37 and j == 1) else 0
            norm = std * np.sqrt(numel)
            lo, hi = -3 * std, 3 * std
            records[name] = ParamStats(name, tuple(shape), numel, True, norm, 0.0, std, lo, hi, hi,
                                       0.0, nan, 0, 1e-3 * decay)
            if step % hist_every == 0:
                counts = rng.multinomial(numel - nan, np.full(bins, 1 / bins)).astype(np.int64)
                hists[name] = Histogram(np.linspace(lo, hi, bins + 1), counts, nan, 0)
            total += norm**2
        norm = float(np.sqrt(total))
        skipped, clipped = step % BLOCK == 53, step % BLOCK == 71
        applied = None if skipped else (norm * 0.5 if clipped else norm)
        ledger = StepLedger(step, iteration=step, micro_batches=1, loss=4 * decay,
                            grad_norm_accumulated=norm, grad_norm_applied=applied,
                            clip_coef=None if skipped else (0.5 if clipped else 1.0),
                            clipped=None if skipped else clipped, skipped=skipped,
                            skip_reason="inf/nan in gradients" if skipped else None,
                            nan_count=2 if step % BLOCK == 37 else 0, lr=(1e-3,))
        record = StepGradients(step, norm, sum(int(np.prod(s)) for _, s in names), records, hists,
                               bins, "auto", 0.01)
        writer.write_step(record, loss=float(4 * decay), ledger=ledger,
                          accumulated={n: r.norm for n, r in records.items()})
    writer.close()


def synth_run(path: str | Path, steps: int, params: int = 20, hist_every: int = 10,
              bins: int = 64) -> Path:
    """Write (or keep, when one of that shape is there) a run of ``steps`` steps at ``path``."""
    path = Path(path)
    db_path = path / "run.sqlite"
    if db_path.is_file():
        with sqlite3.connect(db_path) as db:
            summed = db.execute("SELECT COUNT(*) FROM sqlite_master WHERE name = ?",
                                (SUMMARIES_TABLE,)).fetchone()[0]
            if summed and db.execute("SELECT COUNT(*) FROM steps").fetchone()[0] == steps:
                return path
    _first_block(path, params, bins, hist_every, min(BLOCK, steps))
    with sqlite3.connect(db_path) as db:
        columns = {t: [r[1] for r in db.execute(f"PRAGMA table_info({t})")] for t in COPIED}
        for offset in range(BLOCK, steps, BLOCK):
            last = min(BLOCK, steps - offset)
            for table, cols in columns.items():
                picked = ", ".join("step + ?" if c == "step" else "time + ?" if c == "time" else c
                                   for c in cols)
                args = (offset, offset * 0.01) if table == "steps" else (offset,)
                db.execute(f"INSERT INTO {table} SELECT {picked} FROM {table} "
                           f"WHERE step BETWEEN 1 AND ?", (*args, last))
        folds = SummaryFolds(db, lean=True)  # what the writer's thread does after each step
        for step in range(1, steps + 1):
            folds.after_step(db, step)
        db.commit()
    return path
