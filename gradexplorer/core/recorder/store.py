"""RunWriter: append one step at a time to a run directory, in one transaction per step."""

from __future__ import annotations

import json
import math
import os
import shutil
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from gradexplorer.core.errors import UserError, first_line
from gradexplorer.core.folder_lock import FolderLock
from gradexplorer.core.recorder import schema as S
from gradexplorer.core.stats.ledger import LEDGER_FIELDS, StepLedger
from gradexplorer.core.stats.records import STAT_FIELDS, StepGradients


def _real(value: Any) -> Any:
    """SQLite keeps NaN as NULL; keep it apart from "no value" as the string 'nan'."""
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return value


def ledger_row(ledger: StepLedger) -> tuple:
    """The ``ledger`` table's columns of one StepLedger."""
    d = ledger.as_dict()
    values = [d[f] for f in LEDGER_FIELDS]
    values = [int(v) if isinstance(v, bool) else v for v in values]
    values[-1] = None if ledger.lr is None else json.dumps(list(ledger.lr))
    return (ledger.optimizer_step, *(_real(v) for v in values))


def param_step_rows(step: int, accumulated: dict[str, float], state: dict) -> list[tuple]:
    """``param_steps`` rows: each parameter's accumulated norm and optimizer state."""
    rows = []
    for name in dict.fromkeys([*accumulated, *state]):
        figures = state[name].state_dict() if name in state else {}
        rows.append((step, name, _real(accumulated.get(name)),
                     *(_real(figures.get(f)) for f in S.PARAM_STEP_FIELDS[1:])))
    return rows


def leftover_files(run_dir: Path) -> list[Path]:
    """The database and its WAL files, and the snapshot folder: what a run directory holds."""
    db = S.database_path(run_dir)
    return [db, *(db.with_name(db.name + end) for end in ("-wal", "-shm", "-journal")),
            run_dir / S.SNAPSHOTS]


class RunWriter:
    """Owns the run database; a write that fails (a full disk) is reported once and recording
    stops, while training goes on.

    The run directory is locked while the writer lives (``core/folder_lock.py``): a second
    writer is refused in one line, and a reader knows when the writer is gone. A directory that
    already holds a run is refused unless ``overwrite`` (the earlier run is deleted) or
    ``resume`` (its steps go on: ``first_step`` is the step after its last one).
    """

    def __init__(self, run_dir: str | Path, report=None, *, overwrite: bool = False,
                 resume: bool = False) -> None:
        self.run_dir = Path(run_dir)
        self.failed: str | None = None
        self.first_step = 1
        self.recorded: dict[str, Any] = {}  # the resumed run's structure
        self._report = report or (lambda line: print(line, file=sys.stderr))
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"cannot create run directory {str(self.run_dir)!r}: "
                            f"{exc.strerror or exc}") from None
        self._lock = FolderLock(self.run_dir).acquire(
            f"another gradexplorer process is writing the run {str(self.run_dir)!r}; close that "
            "recorder (rec.close()) or write this run to another run_dir", what="write the run")
        try:
            self._open(overwrite, resume)
        except BaseException:
            self._lock.release()
            raise

    def _open(self, overwrite: bool, resume: bool) -> None:
        db_path = S.database_path(self.run_dir)
        if db_path.exists() and not resume:
            if not overwrite:
                raise UserError(f"{str(self.run_dir)!r} already holds a run; give overwrite=True "
                                "to replace it, resume=True to continue its steps, or another "
                                "run_dir")
            try:
                for path in leftover_files(self.run_dir):
                    if path.is_dir():
                        shutil.rmtree(path)
                    elif path.exists():
                        path.unlink()
            except OSError as exc:
                raise UserError(f"cannot replace the run in {str(self.run_dir)!r}: "
                                f"{exc.strerror or exc}") from None
        if db_path.exists():  # resume: a run this gradexplorer reads, continued after its last step
            from gradexplorer.core.recorder.run import Run

            with Run(self.run_dir) as run:
                self.first_step = (run.last_step or 0) + 1
                self.recorded = run.structure
        else:
            self._create(db_path)
        try:
            self._db = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")  # a committed step survives kill -9
            self._db.executescript(S.SCHEMA)  # a resumed older run gets the tables it lacks
        except (OSError, sqlite3.Error) as exc:
            raise UserError(f"cannot create run directory {str(self.run_dir)!r}: {exc}") from None

    def _create(self, db_path: Path) -> None:
        """A new database, with its tables and format, appearing whole under its name (a
        reader never opens a run without its tables)."""
        new = db_path.with_name(f".{db_path.name}.new-{os.getpid()}")
        new.unlink(missing_ok=True)
        try:
            db = sqlite3.connect(new, isolation_level=None)
            try:
                db.executescript(S.SCHEMA)
                db.execute(f"PRAGMA user_version = {S.VERSION}")
                db.execute("BEGIN IMMEDIATE")
                db.executemany("INSERT INTO meta VALUES (?, ?)", [
                    ("format", S.FORMAT), ("version", str(S.VERSION)), ("created", str(time.time()))])
                db.execute("COMMIT")
            finally:
                db.close()
            os.replace(new, db_path)
        except (OSError, sqlite3.Error) as exc:
            new.unlink(missing_ok=True)
            raise UserError(f"cannot create run directory {str(self.run_dir)!r}: {exc}") from None

    def check_resumed(self, structure: dict) -> None:
        """A resumed run continues the same model: its parameters' names and shapes."""
        recorded = self.recorded.get("parameters")
        if recorded is not None and [(p["name"], p["shape"]) for p in recorded] != [
                (p["name"], p["shape"]) for p in structure["parameters"]]:
            raise UserError(f"watch: resume=True, but {str(self.run_dir)!r} recorded another "
                            "model (its parameters' names or shapes differ); record into a new "
                            "run_dir")

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
                   rank_norms: dict[int, dict[str, float]] | None = None,
                   ledger: StepLedger | None = None, accumulated: dict[str, float] | None = None,
                   optimizer_state: dict | None = None, batch: str | None = None) -> bool:
        """Append one step (figures, histograms, its ledger row, the per-parameter accumulated
        norms and optimizer state, the batch's ids as JSON) in one transaction."""
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

        param_rows = param_step_rows(record.step, accumulated or {}, optimizer_state or {})

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
                if ledger is not None:
                    db.execute(f"INSERT OR REPLACE INTO ledger VALUES ({','.join('?' * 14)})",
                               ledger_row(ledger))
                db.executemany(f"INSERT OR REPLACE INTO param_steps VALUES ({','.join('?' * 8)})",
                               param_rows)
                if batch is not None:
                    db.execute("INSERT OR REPLACE INTO batches VALUES (?, ?)", (record.step, batch))
        return self._guarded(f"step {record.step}", work)

    def write_event(self, step: int, until: int, event: str) -> bool:
        """Keep (or update) the spike event that began at ``step`` (JSON text)."""
        def work():
            with self._transaction() as db:
                db.execute("INSERT OR REPLACE INTO spike_events VALUES (?, ?, ?)",
                           (step, until, event))
        return self._guarded(f"the spike event of step {step}", work)

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
        finally:
            self._lock.release()


WARN_BYTES = 2 * 10**9  # as ``run --export``: say so before a run leaves more than this
LOOKAHEAD_STEPS = 1000  # say so when the run will pass WARN_BYTES within this many steps


class RunSizeNote:
    """Says once, as the run is written, when its database will pass 2 GB at its current rate
    (measured from the database's growth between recorded steps)."""

    def __init__(self, writer: RunWriter, report) -> None:
        self.writer, self._report = writer, report
        self.said = False
        self._first: tuple[int, int] | None = None  # (step, bytes) at the first recorded step

    def size(self) -> int:
        """Bytes of the database as its writer sees it (committed pages, WAL included)."""
        db = self.writer._db
        return db.execute("PRAGMA page_count").fetchone()[0] * db.execute(
            "PRAGMA page_size").fetchone()[0]

    def check(self, step: int) -> None:
        if self.said:
            return
        try:
            size = self.size()
        except sqlite3.Error:
            return
        if self._first is None or step <= self._first[0]:
            self._first = (step, size)
            return
        rate = (size - self._first[1]) / (step - self._first[0])  # bytes per training step
        if size + rate * LOOKAHEAD_STEPS <= WARN_BYTES:
            return
        self.said = True
        reach = step + max(0, math.ceil((WARN_BYTES - size) / rate)) if rate > 0 else step
        self._report(f"gradexplorer: note: the run in {self.writer.run_dir} grows about "
                     f"{rate / 1e6:,.1f} MB a step; at this rate it passes "
                     f"{WARN_BYTES / 1e9:g} GB at about step {reach:,} (record less often with "
                     "every=K, or with fewer bins)")
