"""RunWriter: append steps to a run directory from a writer thread, whole steps per transaction."""

from __future__ import annotations

import json
import math
import os
import shutil
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from gradexplorer.core.files.folder_lock import FolderLock
from gradexplorer.core.messages.errors import UserError, first_line
from gradexplorer.core.messages.failures import FailureChannel
from gradexplorer.core.runs import schema as S
from gradexplorer.core.runs import validate as V
from gradexplorer.core.runs.noise_rows import last_noise_step
from gradexplorer.core.runs.open_writers import OPEN
from gradexplorer.core.runs.param_rows import ParamRows
from gradexplorer.core.runs.param_summaries import SummaryFolds
from gradexplorer.core.runs.run_place import RunDirectoryGone, RunPlace, refuse_linked_snapshots
from gradexplorer.core.runs.settings_text import resumed_settings
from gradexplorer.core.runs.write_thread import WriteThread
from gradexplorer.core.snapshot.retention import steps_to_remove
from gradexplorer.core.stats.records import StepGradients
from gradexplorer.core.steps.ledger import LEDGER_FIELDS, StepLedger


def _real(value: Any) -> Any:
    """SQLite keeps NaN as NULL; keep it apart from "no value" as the string 'nan'."""
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return value


def ledger_row(ledger: StepLedger) -> tuple:
    """The ``ledger`` table's columns of one StepLedger."""
    values = [getattr(ledger, f) for f in LEDGER_FIELDS]  # as_dict's values, without its copies
    values = [int(v) if isinstance(v, bool) else v for v in values]
    values[-1] = None if ledger.lr is None else json.dumps(list(ledger.lr))
    return (ledger.optimizer_step, *(_real(v) for v in values))


def resume_point(run) -> dict[str, Any]:
    """Where a resumed run goes on: ``step``, the last step its loop reached (``loop_step``,
    kept with every transaction of steps and at the recorder's close; an older run's: its last
    recorded step), ``noise_step`` its last step with a noise scale, its ``settings``."""
    step, counted = run.last_step or 0, run.meta("loop_step")
    if isinstance(counted, int) and not isinstance(counted, bool) and 0 <= counted <= V.MAX_STEP:
        step = max(step, counted)
    return {"step": step, "noise_step": last_noise_step(run, step + 1), "settings": run.settings}


def leftover_files(run_dir: Path) -> list[Path]:
    """The database and its WAL files, and the snapshot folder: what a run directory holds."""
    db = S.database_path(run_dir)
    return [db, *(db.with_name(db.name + end) for end in ("-wal", "-shm", "-journal")),
            run_dir / S.SNAPSHOTS]


class StepWrite:
    """A step's write (``RunWriter.write_step``): alone, ``work(db)``; the WriteThread runs
    consecutive ones of a transaction with one ``together(db, writes)`` call, so a fast loop's
    steps cost one encoding of their histograms and one ``executemany`` a table between them."""

    __slots__ = ("args", "writer")

    def __init__(self, writer: RunWriter, args: tuple) -> None:
        self.writer, self.args = writer, args

    def __call__(self, db: sqlite3.Connection) -> None:
        self.together(db, [self])

    @staticmethod
    def together(db: sqlite3.Connection, writes: list[StepWrite]) -> None:
        writes[0].writer._insert_steps(db, [w.args for w in writes])


class RunWriter:
    """Owns the run database; a write that fails (a full disk) is told once (one MonitorWarning,
    or ``report(line)`` where given: ``core/messages/failures.py``) and recording stops, while
    training goes on.

    The writes are done on a writer thread (``write_thread.py``): ``write_step`` and the others
    queue the work and return; ``flush()`` waits for it, ``close()`` commits it all first.

    The run directory is locked while the writer lives (``core/files/folder_lock.py``): a second
    writer is refused in one line, and a reader knows when the writer is gone. A directory that
    already holds a run is refused unless ``overwrite`` (the earlier run is deleted) or
    ``resume`` (its steps go on: ``first_step`` is the step after the last one its loop
    reached, ``resumed`` says where it was: ``resume_point``). ``counted()``, where given, is
    the loop's step now: kept as ``loop_step`` in every transaction of steps.
    """

    def __init__(self, run_dir: str | Path, report=None, *, overwrite: bool = False,
                 resume: bool = False) -> None:
        self.run_dir = Path(run_dir)
        self.failed: str | None = None
        self._fail_lock = threading.Lock()
        self._writes: WriteThread | None = None
        self._place: RunPlace | None = None
        self.first_step = 1
        self.recorded: dict[str, Any] = {}  # the resumed run's structure
        self.resumed: dict[str, Any] = {}  # where the resumed run was (resume_point)
        self.counted = None  # the loop's step now (the recorder's count), read by the writer thread
        self.around_steps: list = []  # f(step, db) before and after steps are inserted
        self._report = FailureChannel.of(report)  # MonitorWarning, or the caller's report(line)
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
        self._writes = WriteThread(self._conn, self._fail, report=self._report)
        OPEN[self.run_dir.resolve()] = self

    def _open(self, overwrite: bool, resume: bool) -> None:
        db_path = S.database_path(self.run_dir)
        refuse_linked_snapshots(self.run_dir)
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
        version = S.VERSION
        if db_path.exists():  # resume: a run this gradexplorer reads, continued after its last step
            from gradexplorer.core.runs.run import Run

            with Run(self.run_dir) as run:  # continued in the format it was written in
                self.resumed = resume_point(run)
                self.first_step = self.resumed["step"] + 1
                self.recorded = run.structure
                version = run.version
        else:
            self._create(db_path)
        self._param_rows = ParamRows(version)
        try:
            # opened here, then used by the writer thread alone (and by flush()ed callers)
            self._conn = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")  # a committed step survives kill -9
            self._conn.executescript(S.schema(version))  # a resumed older run: the tables it lacks
            self._summaries = SummaryFolds(self._conn, self._param_rows.lean)
            self._place = RunPlace(self.run_dir)  # checked once a step: deleted or replaced?
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
                db.executescript(S.schema(S.VERSION))
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
    @property
    def _db(self) -> sqlite3.Connection:
        """The connection, once the writer thread has done every write given so far."""
        self.flush()
        return self._conn

    def flush(self) -> None:
        """Return once every write given so far is committed (or has failed)."""
        if self._writes is not None:
            self._writes.flush()

    def _fail(self, what: str, exc: BaseException) -> None:
        """Report the first failure in one line; recording stops (either thread may call)."""
        with self._fail_lock:
            if self.failed is not None:
                return
            reason = str(exc) if isinstance(exc, (OSError, sqlite3.Error, UserError)) \
                else first_line(exc)
            self.failed = f"gradexplorer: recording stopped, could not write {what} to " \
                          f"{self.run_dir}: {reason}; training goes on"
            if isinstance(exc, RunDirectoryGone):
                self.failed = f"gradexplorer: run directory {self.run_dir} was deleted or " \
                              f"replaced at step {exc.step}: recording stopped; training goes on"
        self._report(self.failed)

    def _guarded(self, what: str, work) -> bool:
        """Run ``work()`` on this thread (files written beside the database); on an error
        report one line, stop recording, return False."""
        if self.failed is not None:
            return False
        try:
            work()
            return True
        except Exception as exc:  # noqa: BLE001 - recording must never break the training loop
            self._fail(what, exc)
            return False

    def _submit(self, what: str, work) -> bool:
        """Queue ``work(db)`` for the writer thread (one transaction with the writes beside
        it); False once recording has stopped."""
        return self.failed is None and self._writes is not None and self._writes.submit(what, work)

    def set_meta(self, values: dict[str, Any]) -> bool:
        """Store JSON values under their keys (model structure, graph, settings)."""
        if self.resumed and "settings" in values:  # the earlier run's histories kept (resume=True)
            values = dict(values, settings=resumed_settings(self.resumed, values["settings"]))
        rows = [(k, json.dumps(v, default=str)) for k, v in values.items()]
        return self._submit("the run's description", lambda db: db.executemany(
            "INSERT OR REPLACE INTO meta VALUES (?, ?)", rows))

    def write_step(self, record: StepGradients, loss: float | None = None, ranks: int = 1,
                   rank_norms: dict[int, dict[str, float]] | None = None,
                   ledger: StepLedger | None = None, accumulated: dict[str, float] | None = None,
                   optimizer_state: dict | None = None, batch: str | None = None) -> bool:
        """Append one step (figures, histograms, its ledger row, the per-parameter accumulated
        norms and optimizer state, the batch's ids as JSON) in one transaction, on the writer
        thread (the record and the dicts given are not changed afterwards: each step's are new;
        ``optimizer_state`` may be a function giving it there, e.g. work under way on the
        statistics worker). Steps waiting together are inserted together (``StepWrite``)."""
        return self._submit(f"step {record.step}", StepWrite(self, (
            record, loss, ranks, rank_norms, ledger, accumulated, optimizer_state, batch,
            time.time())))

    def _insert_steps(self, db, writes: list[tuple]) -> None:
        """The rows of ``writes`` (``write_step``'s arguments and its time), each table's in
        one ``executemany``."""
        self._place.check(writes[-1][0].step)  # still the run opened? (a stat, on this thread)
        for note in self.around_steps:  # the step before the first, as the database holds it
            note(writes[0][0].step - 1, db)
        steps, missing, ranked, ledgers, batches, per_param = [], [], [], [], [], []
        for record, loss, ranks, rank_norms, ledger, accumulated, state, batch, wall in writes:
            if callable(state):
                state = state()
            missing += [(record.step, n, c) for n, c in record.not_recorded.items()]
            steps.append((record.step, wall, _real(record.global_norm), record.total_numel,
                          _real(loss), record.seconds, ranks))
            ranked += [(record.step, rank, name, _real(norm))
                       for rank, norms in (rank_norms or {}).items() for name, norm in norms.items()]
            if ledger is not None:
                ledgers.append(ledger_row(ledger))
            if batch is not None:
                batches.append((record.step, batch))
            per_param.append((record, accumulated or {}, state or {}))
        for table, rows in (("not_recorded", missing), ("steps", steps), ("rank_norms", ranked),
                            ("ledger", ledgers), ("batches", batches)):
            if rows:
                db.executemany(f"INSERT OR REPLACE INTO {table} VALUES "
                               f"({','.join('?' * len(rows[0]))})", rows)
        # no ParamStats built: the rows column by column from the steps' arrays
        self._param_rows.insert_steps(db, per_param)
        counted = writes[-1][0].step if self.counted is None else self.counted()
        db.execute("INSERT OR REPLACE INTO meta VALUES ('loop_step', ?)",
                   (json.dumps(max(counted, writes[-1][0].step)),))  # resume_point reads it
        for write in writes:  # every FOLD_EVERY steps: param_summaries.py
            self._summaries.after_step(db, write[0].step)
        for note in self.around_steps:
            note(writes[-1][0].step, db)

    def write_noise(self, noise) -> bool:
        """Keep a step's noise scale (a ``noise_watch.NoiseStep``, its rows made on the writer
        thread; given before the step's own write, so a reader sees them with the step)."""
        def work(db):
            db.execute(f"INSERT OR REPLACE INTO noise_steps VALUES ({','.join('?' * 14)})",
                       tuple(map(_real, noise.step_row())))
            db.executemany("INSERT OR REPLACE INTO noise_params VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                           [tuple(map(_real, row)) for row in noise.param_rows()])
            db.execute("INSERT OR REPLACE INTO noise_sources VALUES (?, ?, ?)",
                       (noise.step, noise.source, noise.ranks))
        return self._submit(f"the noise scale of step {noise.step}", work)

    def write_event(self, step: int, until: int, event: str) -> bool:
        """Keep (or update) the spike event that began at ``step`` (JSON text)."""
        return self._submit(f"the spike event of step {step}", lambda db: db.execute(
            "INSERT OR REPLACE INTO spike_events VALUES (?, ?, ?)", (step, until, event)))

    def write_per_sample(self, row: tuple) -> bool:
        """Keep a step's per-sample norms (``per_sample_rows.row``)."""
        return self._submit(f"the per-sample norms of step {row[0]}", lambda db: db.execute(
            "INSERT OR REPLACE INTO per_sample_norms VALUES (?, ?, ?, ?)", row))

    def add_snapshot(self, step: int, path: Path, keep: int | None = None) -> bool:
        """Note a snapshot folder; with ``keep``, delete all but the newest ``keep`` (the
        exporter's policy: ``snapshot.retention.steps_to_remove``)."""
        def work(db):
            db.execute("INSERT OR REPLACE INTO snapshots VALUES (?, ?)",
                       (step, str(path.relative_to(self.run_dir))))
            old = []
            if keep is not None:
                held = dict(db.execute("SELECT step, path FROM snapshots").fetchall())
                old = [(s, held[s]) for s in steps_to_remove(held, keep)]
                db.executemany("DELETE FROM snapshots WHERE step = ?", [(s,) for s, _ in old])

            def remove():  # after the commit: rows first, then folders (never a missing one)
                for _, rel in old:
                    shutil.rmtree(self.run_dir / rel, ignore_errors=True)
            return remove if old else None
        return self._submit(f"the snapshot of step {step}", work)

    def snapshot_dir(self, step: int | None = None) -> Path:
        """``RUN/snapshots``; RunDirectoryGone when the run directory was deleted or replaced,
        a UserError when ``snapshots`` is a symbolic link (``run_place.py``)."""
        return self._place.snapshot_dir(step)

    def close(self) -> None:
        """Commit every write given (returns once it is all on disk), close, unlock."""
        try:
            if self._writes is not None:
                self._writes.close()
            self._conn.close()
        except sqlite3.Error:
            pass
        finally:
            if OPEN.get(self.run_dir.resolve()) is self:
                del OPEN[self.run_dir.resolve()]
            if self._place is not None:
                self._place.close()
            self._lock.release()
            self._report.tell_waiting()  # a failure on the writer thread, said here


WARN_BYTES = 2 * 10**9  # as ``run --export``: say so before a run leaves more than this
LOOKAHEAD_STEPS = 1000  # say so when the run will pass WARN_BYTES within this many steps


class RunSizeNote:
    """Says once, as the run is written, when its database will pass 2 GB at its current rate
    (measured from the database's growth between recorded steps)."""

    def __init__(self, writer: RunWriter, report) -> None:
        self.writer, self._report = writer, report
        self.said = False
        self._first: tuple[int, int] | None = None  # (step, bytes) at the first recorded step
        self._page: int | None = None  # the database's page size, once read
        self._looked: int | None = None  # the step of the last look
        writer.around_steps.append(self._check)  # measured around each transaction's steps

    def size(self, db: sqlite3.Connection) -> int:
        """Bytes of the database as its writer sees it (committed pages, WAL included; the
        page size read once)."""
        if self._page is None:
            self._page = db.execute("PRAGMA page_size").fetchone()[0]
        return db.execute("PRAGMA page_count").fetchone()[0] * self._page

    def _check(self, step: int, db: sqlite3.Connection) -> None:
        if self.said or step == self._looked:  # a transaction's first look: the last one's last
            return
        self._looked = step
        try:
            size = self.size(db)
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
                     "stats_every=K, or with fewer bins)")
