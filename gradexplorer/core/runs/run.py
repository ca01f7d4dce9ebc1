"""Read a run directory, also while it grows: ``open_run(run_dir)`` → Run."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from gradexplorer.core.files.folder_lock import writer_present
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.runs import histogram_rows as H
from gradexplorer.core.runs import schema as S
from gradexplorer.core.runs import validate as V
from gradexplorer.core.runs.open_writers import flush_writer_of
from gradexplorer.core.runs.run_step import RunStep
from gradexplorer.core.stats.optimizer_fields import ParamOptimState
from gradexplorer.core.stats.records import STAT_FIELDS, Histogram, ParamStats, StepGradients
from gradexplorer.core.steps.ledger import LEDGER_FIELDS, StepLedger, ledger_from_row


class Run:
    """A run directory. Every query sees complete steps only (one transaction per step); every
    value read is checked (``validate.py``): a damaged run is a one-line UserError."""

    def __init__(self, run_dir: str | Path) -> None:
        self.path = Path(run_dir)
        self.where = f"run {str(self.path)!r}"
        flush_writer_of(self.path)  # a run written in this process: what was given so far
        db_path = S.database_path(self.path)
        if not db_path.is_file():
            raise UserError(f"{str(self.path)!r} is not a gradexplorer run directory "
                            f"(no {S.DATABASE})")
        try:
            self._db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, check_same_thread=False)
        except sqlite3.Error as exc:
            raise UserError(f"cannot read {self.where}: {exc}") from None
        try:
            self._optional, self.version = V.check_database(self._db, self.where)  # format
        except BaseException:
            self._db.close()
            raise
        self._structure = None
        self._shapes: dict[str, tuple] | None = None
        self._graph = None
        self._read: RunStep | None = None  # the step read last, kept

    def _rows(self, sql: str, args: tuple = ()) -> list[tuple]:
        """All rows of a query; a database error (damaged, locked, gone) is one line."""
        try:
            return self._db.execute(sql, args).fetchall()
        except (sqlite3.Error, OverflowError) as exc:
            raise UserError(f"cannot read {self.where}: {exc}") from None

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r}, steps={len(self.steps)})"

    # -- what the run holds --------------------------------------------------------
    @property
    def steps(self) -> list[int]:
        """Recorded steps, oldest first (re-read on every access: a live run grows)."""
        return [r[0] for r in self._rows("SELECT step FROM steps ORDER BY step")]

    @property
    def last_step(self) -> int | None:
        return self._rows("SELECT MAX(step) FROM steps")[0][0]

    def meta(self, key: str, default: Any = None) -> Any:
        """A JSON value the writer stored: ``settings``, ``structure``, ``graph``."""
        rows = self._rows("SELECT value FROM meta WHERE key = ?", (key,))
        return default if not rows else V.json_value(rows[0][0], f"{self.where}: meta {key!r}")

    @property
    def structure(self) -> dict[str, Any]:
        """The model's modules and parameters as the writer recorded them ({} before)."""
        if self._structure is None:
            found = V.structure(self.meta("structure"), f"{self.where}: meta 'structure'")
            if not found:
                return {}  # written once, before the first step: read again until it is there
            self._structure = found
        return self._structure

    @property
    def settings(self) -> dict[str, Any]:
        """What the writer was asked to record (``every``, ``bins``, ``hooks``, ``ranks``,
        ``mode`` …; {} before it is stored)."""
        return V.settings(self.meta("settings"), f"{self.where}: meta 'settings'")

    @property
    def graph(self) -> dict[str, Any] | None:
        """The backward graph of the first backward, from its root (the loss), with each
        operation's ``module`` as the app's trace names it (node-link data), or None. Older runs
        hold the graph of the model's first output, operations in no module."""
        if self._graph is None:  # written once, after the first step: kept once there
            self._graph = V.graph(self.meta("graph"), f"{self.where}: meta 'graph'")
        return self._graph

    @property
    def parameters(self) -> list[str]:
        """Parameter names in the model's order."""
        return [p["name"] for p in self.structure.get("parameters", [])]

    def step_rows(self, after: int = -1) -> list[dict[str, Any]]:
        """``{step, global_norm, total_numel, loss, seconds, time, ranks}`` of every step after
        ``after``, oldest first, in one query (what a follower polls)."""
        after = max(-1, min(int(after), V.MAX_STEP))
        rows = self._rows(f"SELECT {', '.join(V.STEP_COLUMNS)} FROM steps WHERE step > ? "
                          "ORDER BY step", (after,))
        return [V.step_row(row, self.where) for row in rows]

    @property
    def snapshots(self) -> dict[int, Path]:
        """Snapshot folders kept, by step."""
        out = {}
        for step, rel in self._rows("SELECT step, path FROM snapshots ORDER BY step"):
            if not isinstance(step, int) or not isinstance(rel, str) or Path(rel).is_absolute() \
                    or ".." in Path(rel).parts:
                raise UserError(f"{self.where} is damaged: table snapshots holds "
                                f"{V.printable(str(rel))[:60]!r} for step {step}")
            out[step] = self.path / rel
        return out

    def _check_step(self, step: int) -> None:
        step = V.step_number(step, self.where)
        if not self._rows("SELECT 1 FROM steps WHERE step = ?", (step,)):
            steps = self.steps
            held = f"steps {steps[0]}..{steps[-1]}" if steps else "no steps yet"
            raise UserError(f"run {str(self.path)!r} has no step {step} ({held})")

    def step_info(self, step: int) -> dict[str, Any]:
        """One step: ``{global_norm, total_numel, loss, seconds, time, ranks}`` and its ledger
        (``optimizer_step, iteration, micro_batches, grad_norm_accumulated, grad_norm_applied,
        clip_coef, clipped, scale, skipped, skip_reason, nan_count, inf_count, lr``; see
        StepLedger). ``global_norm`` is the applied gradient's; ``loss`` the mean of the step's
        noted micro-batch losses."""
        self._check_step(step)
        row = self._rows(f"SELECT {', '.join(V.STEP_COLUMNS)} FROM steps WHERE step = ?", (step,))
        info = V.step_row(row[0], self.where)
        del info["step"]
        ledger = self.step_ledger(step).as_dict()
        return {**info, **ledger, "loss": info["loss"]}

    def _ledger_rows(self, where: str, args: tuple) -> dict[int, StepLedger]:
        if S.LEDGER_TABLE not in self._optional:
            return {}
        rows = self._rows(f"SELECT step, {', '.join(LEDGER_FIELDS)} FROM {S.LEDGER_TABLE} "
                          f"WHERE {where} ORDER BY step", args)
        return {step: ledger_from_row(step, V.ledger_values(step, values, self.where))
                for step, *values in rows}

    def step_ledger(self, step: int) -> StepLedger:
        """The StepLedger of ``step`` (a run written before the ledger: what its steps table
        holds, the global norm as the applied one)."""
        self._check_step(step)
        found = self._ledger_rows("step = ?", (step,)).get(step)
        if found is not None:
            return found
        info = V.step_row(self._rows(f"SELECT {', '.join(V.STEP_COLUMNS)} FROM steps "
                                     "WHERE step = ?", (step,))[0], self.where)
        return StepLedger(step, loss=info["loss"], grad_norm_applied=info["global_norm"])

    def ledger(self, after: int = -1) -> list[StepLedger]:
        """The StepLedger of every step after ``after``, oldest first (skipped ones included)."""
        after = max(-1, min(int(after), V.MAX_STEP))
        rows = self._ledger_rows("step > ?", (after,))
        out = []  # a step without a ledger row: step_ledger's, from the same one query
        for row in self._rows(f"SELECT {', '.join(V.STEP_COLUMNS)} FROM steps WHERE step > ? "
                              "ORDER BY step", (after,)):
            if row[0] in rows:
                out.append(rows[row[0]])
            else:
                info = V.step_row(row, self.where)
                out.append(StepLedger(row[0], loss=info["loss"], grad_norm_applied=info["global_norm"]))
        return out

    def step(self, step: int) -> RunStep:
        """Step ``step`` as one record: its figures, histograms, ledger and optimizer state
        (``RunStep``; each part read when first asked for; the step read last is kept)."""
        if self._read is None or self._read.step != step:
            self._read = RunStep(self, step)
        return self._read

    def optimizer_state(self, step: int) -> dict[str, ParamOptimState]:
        """``{name: ParamOptimState}`` after ``step`` ({} when not recorded): ``step(n)``'s."""
        return self.step(step).optimizer_state

    def _param_steps(self, step: int) -> dict[str, dict[str, Any]]:
        if S.PARAM_STEPS_TABLE not in self._optional:
            return {}
        rows = self._rows(f"SELECT name, {', '.join(S.PARAM_STEP_FIELDS)} FROM "
                          f"{S.PARAM_STEPS_TABLE} WHERE step = ?", (step,))
        return {name: V.param_step_values(step, name, values, self.where)
                for name, *values in rows}

    def stats(self, step: int) -> dict[str, ParamStats]:
        """``{name: ParamStats}`` at ``step``, of the gradient as applied, as the monitor
        reported it (parameters without a gradient are left out): ``step(n).stats``."""
        return self.step(step).stats

    def figures(self, step: int) -> dict[str, dict[str, Any]]:
        """``{name: {norm, mean, std, min, max, abs_max, zero_fraction, nan_count, inf_count,
        update_ratio, grad_norm_accumulated, lr, exp_avg_norm, exp_avg_sq_rms, effective_lr,
        momentum_norm}}`` at ``step``: every per-parameter figure as one flat row, for tables
        and exports (parameters without a gradient left out). ``norm`` and the rest of the first
        ten describe the gradient as applied; ``grad_norm_accumulated`` the gradient as the last
        backward left it; the optimizer's figures are read after the step (None where it keeps
        no such state, or the run predates them): ``step(n).figures``."""
        return self.step(step).figures

    def _stat_rows(self, step: int, name: str | None = None) -> dict[str, tuple[int, bool, dict]]:
        """``{name: (numel, has_grad, figures)}`` at ``step`` (only ``name``'s when given),
        checked, in the model's order."""
        self._check_step(step)
        rows = self._rows(f"SELECT name, numel, has_grad, {', '.join(STAT_FIELDS)} FROM stats "
                          "WHERE step = ?" + (" AND name = ?" if name else ""),
                          (step, name) if name else (step,))
        order = {n: i for i, n in enumerate(self.parameters)}
        out = {}
        for name, numel, has_grad, *figures in rows:
            name, numel, has_grad, values = V.stat_row(step, name, numel, has_grad, figures,
                                                       self.where)
            out[name] = (numel, has_grad, values)
        return dict(sorted(out.items(), key=lambda kv: order.get(kv[0], len(order))))

    def not_recorded(self, step: int) -> dict[str, str]:
        """``{name: cause}`` of what ``step`` could not measure ("" : its update ratios); {}
        when everything was recorded (and in runs written before this was kept)."""
        step = V.step_number(step, self.where)
        self._check_step(step)
        if S.NOT_RECORDED_TABLE not in self._optional:
            return {}
        out = {}
        for name, cause in self._rows("SELECT name, cause FROM not_recorded WHERE step = ? "
                                      "ORDER BY name", (step,)):
            if not isinstance(name, str) or not isinstance(cause, str):
                raise UserError(f"{self.where}, table not_recorded at step {step} holds "
                                f"{V.printable(str(name))[:40]!r}: {V.printable(str(cause))[:40]!r}"
                                " where a parameter name and a cause (text) belong")
            out[name] = cause
        return out

    def rank_norms(self, step: int) -> dict[int, dict[str, float]]:
        """``{rank: {name: norm}}`` of a run recorded with ``per_rank=True`` ({} otherwise)."""
        self._check_step(step)
        out: dict[int, dict[str, float]] = {}
        if "rank_norms" not in self._optional:
            return out
        at = f"{self.where}, table rank_norms at step {step}"
        for rank, name, norm in self._rows(
                "SELECT rank, name, norm FROM rank_norms WHERE step = ? ORDER BY rank", (step,)):
            if not isinstance(name, str):
                raise UserError(f"{at} holds a parameter name of type {type(name).__name__}")
            out.setdefault(V.count(rank, f"{at}, column rank", 2**31), {})[name] = V.figure(
                norm, f"{at}, column norm")
        return out

    def spike_events(self) -> list:
        """The spike events recorded (SpikeEvent, oldest first; [] for runs from before them)."""
        from gradexplorer.core.diagnose.spikes import SpikeEvent

        if "spike_events" not in self._optional:
            return []
        out = []
        for step, text in self._rows("SELECT step, event FROM spike_events ORDER BY step"):
            at = f"{self.where}, table spike_events at step {V.printable(str(step))[:24]}"
            data = V.json_value(text, at)
            try:
                out.append(SpikeEvent.from_json(data))
            except (TypeError, KeyError, AttributeError):
                raise UserError(f"{at} does not hold a spike event") from None
        return out

    def batch_ids(self, step: int) -> Any:
        """The ids noted for ``step``'s batch (``rec.note_batch``, or ``{"make_batch": N}``)."""
        step = V.step_number(step, self.where)
        if "batches" not in self._optional:
            return None
        rows = self._rows("SELECT ids FROM batches WHERE step = ?", (step,))
        return None if not rows else V.json_value(rows[0][0], f"{self.where}, table batches "
                                                               f"at step {step}")

    def per_sample(self, step: int):
        """The step's per-sample gradient norms (``per_sample_rows.RecordedPerSample``), or
        None (not recorded: ``watch(per_sample_norms=True)``; runs from before them)."""
        from gradexplorer.core.runs import per_sample_rows as P

        step = V.step_number(step, self.where)
        rows = self._rows(f"SELECT samples, norms, top FROM {P.TABLE} WHERE step = ?", (step,)) \
            if P.TABLE in self._optional else []
        return P.read(step, *rows[0], self.where, self.meta("per_sample", {}) or {}) if rows else None

    def per_sample_steps(self) -> list[int]:
        """Steps with per-sample norms, oldest first ([] for runs from before them)."""
        return [r[0] for r in self._rows("SELECT step FROM per_sample_norms ORDER BY step")] \
            if "per_sample_norms" in self._optional else []

    def histogram(self, step: int, name: str) -> tuple[np.ndarray, np.ndarray]:
        """``(edges, counts)`` of ``name``'s gradient at ``step``."""
        h = self.histograms(step, name).get(name)
        if h is None:
            raise UserError(f"run {str(self.path)!r} has no histogram of {name!r} at step {step}")
        return h.edges, h.counts

    def histograms(self, step: int, name: str | None = None) -> dict[str, Histogram]:
        """Histograms at ``step`` by parameter name (only ``name``'s when given)."""
        self._check_step(step)
        query = "SELECT name, edges, counts, nan_count, inf_count, below, above FROM histograms " \
                "WHERE step = ?" + (" AND name = ?" if name else "")
        rows = self._rows(query, (step, name) if name else (step,))
        block = H.decode_block(rows, self.version) if len(rows) > 1 else None  # a whole step at once
        if block is not None:
            return {n: Histogram(e, c, *extras) for n, e, c, *extras in block}
        out = {}
        for n, e, c, *extras in rows:
            if not isinstance(n, str):
                raise UserError(f"{self.where}, table histograms at step {step} holds a "
                                f"parameter name of type {type(n).__name__}")
            out[n] = Histogram(*H.decode(e, c, tuple(extras), self.version, lambda n=n: V.row_where(
                self.where, "histograms", step, n)))
        return out

    def param_stats(self, step: int, name: str | None = None,
                    missing: dict[str, str] | None = None) -> dict[str, ParamStats]:
        """``{name: ParamStats}`` at ``step`` as the monitor reported them (only ``name``'s when
        given: one indexed read, what a view of one parameter over many steps asks for; all of
        them: ``step(n).params``)."""
        if name is None and missing is None:
            return dict(self.step(step).params)
        return self._param_stats(step, name, missing)

    def _param_stats(self, step: int, name: str | None,
                     missing: dict[str, str] | None) -> dict[str, ParamStats]:
        if self._shapes is None or not self._shapes:
            self._shapes = {p["name"]: tuple(p["shape"]) for p in self.structure.get("parameters", [])}
        params = {n: ParamStats(n, self._shapes.get(n, (numel,)), numel, has_grad, **values)
                  for n, (numel, has_grad, values) in self._stat_rows(step, name).items()}
        for n, cause in (self.not_recorded(step) if missing is None else missing).items():
            if n in params:
                params[n].not_recorded = cause
        return params

    def has_histograms(self, step: int) -> bool:
        """Whether ``step`` recorded histograms (one indexed read)."""
        return bool(self._rows("SELECT 1 FROM histograms WHERE step = ? LIMIT 1", (step,)))

    def step_gradients(self, step: int) -> StepGradients:
        """The step as the monitor reported it (what the app's views draw; a committed step
        never changes: the one read last is kept, ``check`` and a viewer's first read share it):
        ``step(n).gradients``."""
        return self.step(step).gradients

    def check(self, last: int = 1) -> None:
        """Read what a viewer reads first (the structure, the graph, the newest ``last`` steps
        whole); a damaged run is the one-line UserError here, before anything is shown (an
        older step found damaged later is the same line from the read that finds it)."""
        _ = self.structure, self.graph, self.spike_events()
        for row in self.step_rows()[-last:]:
            self.step_gradients(row["step"])
            self.batch_ids(row["step"])

    def follow(self, poll: float = 0.2, timeout: float | None = None,
               after: int | None = None) -> Iterator[int]:
        """Yield each step once, in order, as it is committed; stop once no process writes the
        run any more (its writer closed it, or died: the run directory's lock is free) and every
        step is read, or after ``timeout`` seconds without a new step (None: no time limit)."""
        last = after if after is not None else -1
        quiet_since = time.monotonic()
        while True:
            writing = writer_present(self.path)  # before reading: no step is missed
            new = [r[0] for r in self._rows("SELECT step FROM steps WHERE step > ? ORDER BY step",
                                            (last,))]
            for step in new:
                yield step
                last = step
            if new:
                quiet_since = time.monotonic()
            elif not writing or timeout is not None and time.monotonic() - quiet_since > timeout:
                return
            else:
                time.sleep(poll)


def open_run(run_dir: str | Path) -> Run:
    """Open a run directory written by ``gradexplorer.watch`` (also while it is being written);
    a damaged run, or one a newer gradexplorer wrote, is a one-line UserError."""
    return Run(run_dir)
