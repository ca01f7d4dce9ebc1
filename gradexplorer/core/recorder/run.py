"""Read a run directory, also while it grows: ``open_run(run_dir)`` → Run."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from gradexplorer.core.errors import UserError
from gradexplorer.core.recorder import schema as S
from gradexplorer.core.stats.records import STAT_FIELDS, Histogram, ParamStats, StepGradients


def _number(value: Any) -> Any:
    return float("nan") if value == "nan" else value


class Run:
    """A run directory. Every query sees complete steps only (one transaction per step)."""

    def __init__(self, run_dir: str | Path) -> None:
        self.path = Path(run_dir)
        db_path = S.database_path(self.path)
        if not db_path.is_file():
            raise UserError(f"{str(self.path)!r} is not a gradexplorer run directory "
                            f"(no {S.DATABASE})")
        try:
            self._db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, check_same_thread=False)
            fmt = self._db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        except sqlite3.Error as exc:
            raise UserError(f"cannot read run {str(self.path)!r}: {exc}") from None
        if not fmt or fmt[0] != S.FORMAT:
            raise UserError(f"{str(self.path)!r} is not a gradexplorer run directory")
        self._structure = None

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
        return [r[0] for r in self._db.execute("SELECT step FROM steps ORDER BY step")]

    @property
    def last_step(self) -> int | None:
        row = self._db.execute("SELECT MAX(step) FROM steps").fetchone()
        return row[0]

    def meta(self, key: str, default: Any = None) -> Any:
        """A JSON value the writer stored: ``settings``, ``structure``, ``graph``."""
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    @property
    def structure(self) -> dict[str, Any]:
        """The model's modules and parameters as the writer recorded them ({} before)."""
        if self._structure is None:
            self._structure = self.meta("structure")  # written once, before the first step
        return self._structure or {}

    @property
    def parameters(self) -> list[str]:
        """Parameter names in the model's order."""
        return [p["name"] for p in self.structure.get("parameters", [])]

    def step_rows(self, after: int = -1) -> list[dict[str, Any]]:
        """``{step, global_norm, total_numel, loss, seconds, time, ranks}`` of every step after
        ``after``, oldest first, in one query (what a follower polls)."""
        keys = ("step", "global_norm", "total_numel", "loss", "seconds", "time", "ranks")
        rows = self._db.execute(f"SELECT {', '.join(keys)} FROM steps WHERE step > ? "
                                "ORDER BY step", (after,))
        return [{k: _number(v) for k, v in zip(keys, row, strict=True)} for row in rows]

    @property
    def snapshots(self) -> dict[int, Path]:
        """Snapshot folders kept, by step."""
        rows = self._db.execute("SELECT step, path FROM snapshots ORDER BY step")
        return {step: self.path / rel for step, rel in rows}

    def _check_step(self, step: int) -> None:
        if self._db.execute("SELECT 1 FROM steps WHERE step = ?", (step,)).fetchone() is None:
            steps = self.steps
            held = f"steps {steps[0]}..{steps[-1]}" if steps else "no steps yet"
            raise UserError(f"run {str(self.path)!r} has no step {step} ({held})")

    def step_info(self, step: int) -> dict[str, Any]:
        """``{global_norm, total_numel, loss, seconds, time, ranks}`` of one step."""
        self._check_step(step)
        row = self._db.execute("SELECT global_norm, total_numel, loss, seconds, time, ranks "
                               "FROM steps WHERE step = ?", (step,)).fetchone()
        keys = ("global_norm", "total_numel", "loss", "seconds", "time", "ranks")
        return {k: _number(v) for k, v in zip(keys, row, strict=True)}

    def stats(self, step: int) -> dict[str, dict[str, Any]]:
        """``{name: {norm, mean, std, min, max, abs_max, zero_fraction, nan_count, inf_count,
        update_ratio}}`` at ``step`` (parameters without a gradient are left out)."""
        self._check_step(step)
        rows = self._db.execute(f"SELECT name, {', '.join(STAT_FIELDS)} FROM stats "
                                "WHERE step = ? AND has_grad = 1", (step,))
        order = {n: i for i, n in enumerate(self.parameters)}
        out = {row[0]: {f: _number(v) for f, v in zip(STAT_FIELDS, row[1:], strict=True)}
               for row in rows}
        return dict(sorted(out.items(), key=lambda kv: order.get(kv[0], len(order))))

    def not_recorded(self, step: int) -> dict[str, str]:
        """``{name: cause}`` of what ``step`` could not measure ("" : its update ratios); {}
        when everything was recorded (and in runs written before this was kept)."""
        self._check_step(step)
        try:
            rows = self._db.execute("SELECT name, cause FROM not_recorded WHERE step = ? "
                                    "ORDER BY name", (step,)).fetchall()
        except sqlite3.OperationalError:  # an older run: no such table
            return {}
        return dict(rows)

    def rank_norms(self, step: int) -> dict[int, dict[str, float]]:
        """``{rank: {name: norm}}`` of a run recorded with ``per_rank=True`` ({} otherwise)."""
        self._check_step(step)
        out: dict[int, dict[str, float]] = {}
        for rank, name, norm in self._db.execute(
                "SELECT rank, name, norm FROM rank_norms WHERE step = ? ORDER BY rank", (step,)):
            out.setdefault(rank, {})[name] = _number(norm)
        return out

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
        rows = self._db.execute(query, (step, name) if name else (step,))
        return {
            n: Histogram(np.frombuffer(e, np.float64).copy(), np.frombuffer(c, np.int64).copy(),
                         nans, infs, below, above)
            for n, e, c, nans, infs, below, above in rows
        }

    def step_gradients(self, step: int) -> StepGradients:
        """The step as the monitor reported it (what the app's views draw)."""
        info = self.step_info(step)
        rows = self._db.execute(f"SELECT name, numel, has_grad, {', '.join(STAT_FIELDS)} "
                                "FROM stats WHERE step = ?", (step,)).fetchall()
        shapes = {p["name"]: tuple(p["shape"]) for p in self.structure.get("parameters", [])}
        params = {}
        for name, numel, has_grad, *figures in rows:
            values = {f: _number(v) for f, v in zip(STAT_FIELDS, figures, strict=True)}
            params[name] = ParamStats(name, shapes.get(name, (numel,)), numel, bool(has_grad),
                                      **values)
        order = {n: i for i, n in enumerate(self.parameters)}
        params = dict(sorted(params.items(), key=lambda kv: order.get(kv[0], len(order))))
        missing = self.not_recorded(step)
        for name, cause in missing.items():
            if name in params:
                params[name].not_recorded = cause
        settings = self.meta("settings") or {}
        return StepGradients(step, info["global_norm"], info["total_numel"] or 0, params,
                             self.histograms(step), settings.get("bins", 64), "auto",
                             info["seconds"] or 0.0, not_recorded=missing)

    def follow(self, poll: float = 0.2, timeout: float | None = None,
               after: int | None = None) -> Iterator[int]:
        """Yield each step once, in order, as it is committed; stop after ``timeout`` seconds
        without a new step (None: never)."""
        last = after if after is not None else -1
        quiet_since = time.monotonic()
        while True:
            new = [r[0] for r in self._db.execute(
                "SELECT step FROM steps WHERE step > ? ORDER BY step", (last,))]
            for step in new:
                yield step
                last = step
            if new:
                quiet_since = time.monotonic()
            elif timeout is not None and time.monotonic() - quiet_since > timeout:
                return
            else:
                time.sleep(poll)


def open_run(run_dir: str | Path) -> Run:
    """Open a run directory written by ``gradexplorer.watch`` (also while it is being written)."""
    return Run(run_dir)
