"""RunWriter: append one step at a time to a run directory, in one transaction per step."""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from gradexplorer.core.errors import UserError, first_line
from gradexplorer.core.recorder import schema as S
from gradexplorer.core.stats.records import STAT_FIELDS, StepGradients


def _real(value: Any) -> Any:
    """SQLite keeps NaN as NULL; keep it apart from "no value" as the string 'nan'."""
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return value


class RunWriter:
    """Owns the run database; a write that fails (a full disk) is reported once and recording
    stops, while training goes on."""

    def __init__(self, run_dir: str | Path, report=None) -> None:
        self.run_dir = Path(run_dir)
        self.failed: str | None = None
        self._report = report or (lambda line: print(line, file=sys.stderr))
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(S.database_path(self.run_dir), isolation_level=None,
                                       check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")  # a committed step survives kill -9
            self._db.executescript(S.SCHEMA)
            self._db.executescript(S.NOT_RECORDED_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise UserError(f"cannot create run directory {str(self.run_dir)!r}: {exc}") from None
        with self._transaction() as db:
            db.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (S.FORMAT,))
            db.execute("INSERT OR IGNORE INTO meta VALUES ('version', ?)", (str(S.VERSION),))
            db.execute("INSERT OR IGNORE INTO meta VALUES ('created', ?)", (str(time.time()),))

    # -- writing -------------------------------------------------------------------
    def _transaction(self):
        writer = self

        class _Tx:
            def __enter__(self):
                writer._db.execute("BEGIN IMMEDIATE")
                return writer._db

            def __exit__(self, kind, exc, tb):
                writer._db.execute("COMMIT" if kind is None else "ROLLBACK")
                return False

        return _Tx()

    def _guarded(self, what: str, work) -> bool:
        """Run ``work()``; on a storage error report one line, stop recording, return False."""
        if self.failed is not None:
            return False
        try:
            work()
            return True
        except Exception as exc:  # noqa: BLE001 - recording must never break the training loop
            if self._db.in_transaction:
                try:
                    self._db.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
            reason = str(exc) if isinstance(exc, (OSError, sqlite3.Error, UserError)) \
                else first_line(exc)
            self.failed = f"gradexplorer: recording stopped, could not write {what} to " \
                          f"{self.run_dir}: {reason}; training goes on"
            self._report(self.failed)
            return False

    def set_meta(self, values: dict[str, Any]) -> bool:
        """Store JSON values under their keys (model structure, graph, settings)."""
        def work():
            with self._transaction() as db:
                db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                               [(k, json.dumps(v, default=str)) for k, v in values.items()])
        return self._guarded("the run's description", work)

    def write_step(self, record: StepGradients, loss: float | None = None, ranks: int = 1,
                   rank_norms: dict[int, dict[str, float]] | None = None) -> bool:
        """Append one step (figures and histograms) in one transaction."""
        stat_rows = [
            (record.step, s.name, s.numel, int(s.has_grad),
             *(_real(getattr(s, f)) for f in STAT_FIELDS))
            for s in record.params.values()
        ]
        hist_rows = [
            (record.step, name, np.asarray(h.edges, np.float64).tobytes(),
             np.asarray(h.counts, np.int64).tobytes(), int(h.nan_count), int(h.inf_count),
             int(h.below), int(h.above))
            for name, h in record.histograms.items()
        ]

        def work():
            with self._transaction() as db:
                db.executemany("INSERT OR REPLACE INTO not_recorded VALUES (?, ?, ?)",
                               [(record.step, n, c) for n, c in record.not_recorded.items()])
                db.execute("INSERT OR REPLACE INTO steps VALUES (?, ?, ?, ?, ?, ?, ?)",
                           (record.step, time.time(), _real(record.global_norm), record.total_numel,
                            _real(loss), record.seconds, ranks))
                db.executemany(f"INSERT OR REPLACE INTO stats VALUES ({','.join('?' * 14)})",
                               stat_rows)
                db.executemany("INSERT OR REPLACE INTO histograms VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                               hist_rows)
                db.executemany("INSERT OR REPLACE INTO rank_norms VALUES (?, ?, ?, ?)",
                               [(record.step, rank, name, _real(norm))
                                for rank, norms in (rank_norms or {}).items()
                                for name, norm in norms.items()])
        return self._guarded(f"step {record.step}", work)

    def add_snapshot(self, step: int, path: Path, keep: int | None = None) -> bool:
        """Note a snapshot folder; with ``keep``, delete all but the newest ``keep``."""
        def work():
            with self._transaction() as db:
                db.execute("INSERT OR REPLACE INTO snapshots VALUES (?, ?)",
                           (step, str(path.relative_to(self.run_dir))))
                old = []
                if keep is not None:
                    old = db.execute("SELECT step, path FROM snapshots ORDER BY step DESC "
                                     "LIMIT -1 OFFSET ?", (keep,)).fetchall()
                    db.executemany("DELETE FROM snapshots WHERE step = ?", [(s,) for s, _ in old])
            for _, rel in old:  # rows first, then folders: a reader never sees a missing one
                shutil.rmtree(self.run_dir / rel, ignore_errors=True)
        return self._guarded(f"the snapshot of step {step}", work)

    def snapshot_dir(self) -> Path:
        return self.run_dir / S.SNAPSHOTS

    def close(self) -> None:
        try:
            self._db.close()
        except sqlite3.Error:
            pass
