"""WriteThread: a run database's writes done off the training thread, commits batched.

The training thread appends each write (a step's figures, an event, a snapshot's row) to a
bounded queue and goes on, without waking anyone; one writer thread owns the SQLite connection
from then on. Every ``PERIOD`` seconds (or at once on ``flush()``/``close()``) it takes the
writes waiting (at most ``BATCH``) and commits them in one transaction, so a reader sees whole
steps only, and a fast training loop costs one wake-up and one commit per period, not per step
(a commit writes each page the steps touched once: ~0.4 ms of a 0.6 ms step's write on GPT-2
tiny when each step has its own). A queue half full (``WAKE_AT``) wakes the writer early, so a
fast loop's queue empties before the training thread would wait for room.
When the queue is full (``CAPACITY`` writes: the disk is slower than the training), the
training thread waits for room: nothing is dropped or merged. A ``kill -9`` loses at most the
writes not yet committed: ``CAPACITY`` waiting plus ``BATCH`` in the transaction under way
(in practice those of the last ``PERIOD``). A write that fails is reported once (``on_error``)
and no later write is attempted. Where no thread can be started (a process or address-space
limit), that is said in one line (``report``) and the writes are committed on the training
thread instead, ``BATCH`` at a time and on ``flush()``/``close()``.
"""

from __future__ import annotations

import collections
import sqlite3
import threading
from collections.abc import Callable

CAPACITY = 256  # writes waiting at most; the training thread waits when the queue is full
BATCH = 256  # writes committed together at most
PERIOD = 1.0  # seconds between the writer's looks at the queue (a transaction costs ~0.5 ms of
# CPU beside its rows, its wake-ups and GIL hand-overs included: ResNet-18's light steps
# (watch(overhead=), ~130 ms apart) cost the writer 0.7-1.0 ms a step at 0.2 s, 0.5-0.6 at 1 s;
# a reader still sees whole steps only, and a kill -9 loses those of the last second)
WAKE_AT = CAPACITY // 2  # writes waiting that wake the writer before its period is over

Work = Callable[[sqlite3.Connection], Callable[[], None] | None]  # may return an after-commit step


class WriteThread:
    """Runs ``work(db)`` of each submitted write in order on one thread, in batched transactions.

    ``work`` runs inside the transaction; what it returns, if callable, runs after the commit
    (deleting folders whose rows are gone). Consecutive works with the same ``together``
    function are done by one ``together(db, works)`` call (a step's writes: their rows inserted
    together); where a batch fails, each write is done alone again to find the one that fails.
    ``on_error(what, exc)`` is called once, on the writer thread, for the first write that
    fails; the writes of its batch before it are committed, it and every later write are not.
    """

    def __init__(self, db: sqlite3.Connection, on_error: Callable[[str, BaseException], None],
                 name: str = "gradexplorer-run-writer",
                 report: Callable[[str], None] = print) -> None:
        self.db = db
        self._on_error = on_error
        self.failed = False
        self._pending: collections.deque = collections.deque()
        self._changed = threading.Condition()  # room in the queue, writes done
        self._wake = threading.Event()  # commit now (flush, close, a half-full queue)
        self._work = threading.Event()  # a write waits (set only while the writer is idle)
        self._idle = False  # the writer sleeps until a write comes (nothing was waiting)
        self._submitted = self._done = 0
        self._stopping = False
        self._thread: threading.Thread | None = threading.Thread(target=self._loop, name=name,
                                                                 daemon=True)
        try:
            self._thread.start()
        except RuntimeError as exc:  # "can't start new thread": write on the caller's instead
            self._thread = None
            report(f"gradexplorer: cannot start the run's writer thread ({exc}); writing on the "
                   "training thread instead")

    def submit(self, what: str, work: Work) -> bool:
        """Queue a write (waiting while the queue is full); False once writing has failed."""
        if self.failed or self._stopping:
            return False
        if self._thread is None:  # no writer thread: commit here, a batch at a time
            self._pending.append((what, work))
            self._submitted += 1
            if len(self._pending) >= BATCH:
                self._drain()
            return True
        if len(self._pending) >= CAPACITY:
            self._wake.set()
            with self._changed:
                self._changed.wait_for(lambda: len(self._pending) < CAPACITY
                                       or not self._thread.is_alive())
        self._submitted += 1  # the training thread alone submits
        self._pending.append((what, work))
        if self._idle:  # read after the append: the writer rechecks the queue after setting it
            self._work.set()
        if len(self._pending) == WAKE_AT:
            self._wake.set()
        return True

    def flush(self) -> None:
        """Return once every write submitted so far is committed (or has failed)."""
        if self._thread is None:
            self._drain()
            return
        target = self._submitted
        self._wake.set()
        with self._changed:
            self._changed.wait_for(lambda: self._done >= target or not self._thread.is_alive())

    def close(self) -> None:
        """Commit every write submitted, then end the thread."""
        self._stopping = True
        if self._thread is None:
            self._drain()
            return
        self._wake.set()
        self._work.set()  # after _stopping: an idle writer wakes to see it
        self._thread.join()

    # -- the writer thread ---------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            if not self._pending and not self._stopping:
                self._idle = True  # then the queue looked at again: a write appended before
                if not self._pending and not self._stopping:  # this saw no idle writer
                    self._work.wait()
                self._idle = False
                self._work.clear()
            self._wake.wait(PERIOD)  # the writes of a period gathered, unless asked for now
            self._wake.clear()
            stopping = self._stopping
            self._drain()
            if stopping:
                return

    def _drain(self) -> None:
        """Commit every write waiting, ``BATCH`` at a time."""
        while self._pending:
            batch = []
            while self._pending and len(batch) < BATCH:
                batch.append(self._pending.popleft())
            try:
                self._commit(batch)
            finally:
                with self._changed:
                    self._done += len(batch)
                    self._changed.notify_all()

    def _commit(self, batch: list) -> None:
        if self.failed or not batch:
            return
        try:
            done = self._run(batch)
        except Exception:  # noqa: BLE001 - find the first write that fails, keep those before it
            self._rollback()
            done = []
            for what, work in batch:
                try:
                    done += self._run([(what, work)])
                except Exception as exc:  # noqa: BLE001 - recording never breaks training
                    self._rollback()
                    self._fail(what, exc)
                    break
        for what, step in done:  # after the commit: deleting old folders, reading the size
            try:
                step()
            except Exception as exc:  # noqa: BLE001
                self._fail(what, exc)
                return

    def _run(self, batch: list) -> list:
        self.db.execute("BEGIN IMMEDIATE")
        after = []
        for group in _together(batch):
            if len(group) == 1:
                what, work = group[0]
                after.append((what, work(self.db)))
            else:  # consecutive writes that are inserted together (``RunWriter.StepWrite``)
                group[0][1].together(self.db, [work for _, work in group])
        self.db.execute("COMMIT")
        return [(what, step) for what, step in after if callable(step)]

    def _fail(self, what: str, exc: BaseException) -> None:
        self.failed = True
        self._on_error(what, exc)

    def _rollback(self) -> None:
        if self.db.in_transaction:
            try:
                self.db.execute("ROLLBACK")
            except sqlite3.Error:
                pass


def _together(batch: list) -> list[list]:
    """``batch`` as runs of consecutive writes: those whose work has the same ``together(db,
    works)`` (one call does them all, returning nothing to run after the commit) in one run,
    any other write alone."""
    groups: list[list] = []
    last = None
    for what, work in batch:
        together = getattr(work, "together", None)
        if together is not None and together is last:
            groups[-1].append((what, work))
        else:
            groups.append([(what, work)])
        last = together
    return groups
