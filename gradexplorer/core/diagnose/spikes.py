"""Spike detection on the figures the monitor already brought to the host, and onset ranking.

``SpikeDetector.observe(step, loss, record)`` takes a recorded step (a StepGradients, or None
when only the loss and global norm are known) and returns the SpikeEvent the step belongs to
when it leaves its band (spike_band.py) or holds NaN/Inf, else None. Flagged steps less than
``merge`` recorded steps apart are one event. Each event ranks the parameters (and their
modules) by **onset**: the first step of the unbroken stretch, ending inside the event, over
which any of the parameter's figures stayed above ``onset_k`` band widths, at most
``lookback`` steps before the event; ties go to the larger excursion (the factor by which the
figure exceeded its band's centre).
Nothing here touches a tensor: no host sync.
"""

from __future__ import annotations

import json
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gradexplorer.core.diagnose import spike_warmup
from gradexplorer.core.diagnose.spike_band import RollingBands, SpikeSettings, log_scale

LOSS, GLOBAL = "loss", "global norm"
FIGURES = ("norm", "update")  # per parameter: gradient norm, update ratio ‖Δθ‖/‖θ‖
_UPDATE = 2 + FIGURES.index("update")  # the first parameter's update ratio in a step's vector
MAX_RANKED = 32  # parameters kept in an event's ranking (all that moved, up to this many)
TOP_FIGURES = 8  # ranked parameters whose figures around the event are kept with it
MAX_KEPT = 128  # recorded steps of figures kept with one event


@dataclass
class SpikeEvent:
    """One spike: its first and last flagged step, why, and who moved first."""

    step: int
    until: int
    reasons: list[str] = field(default_factory=list)
    ranking: list[dict[str, Any]] = field(default_factory=list)
    modules: list[dict[str, Any]] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    batch: Any = None
    samples: list[dict[str, Any]] = field(default_factory=list)
    grad_samples: list[dict[str, Any]] = field(default_factory=list)  # by per-sample grad norm

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SpikeEvent:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})

    def summary(self, top: int = 3) -> str:
        """``step 41 (to 43): loss ×12 above its band; first to move: fc1.weight (step 41, ×980)``."""
        span = f" (to {self.until})" if self.until != self.step else ""
        first = ", ".join(f"{r['name']} (step {r['onset']}, {factor_text(r['factor'])})"
                          for r in self.ranking[:top])
        return f"step {self.step}{span}: {'; '.join(self.reasons)}" + \
            (f"; first to move: {first}" if first else "")


MAX_ID_TEXT = 60  # characters of a batch's ids shown on one line


def ids_text(ids) -> str:
    """A batch's ids on one line (``gradexplorer spikes``, the report), cut at MAX_ID_TEXT
    characters; ``not noted`` when the loop noted none."""
    if ids is None:
        return "not noted"
    text = json.dumps(ids)
    return text if len(text) <= MAX_ID_TEXT else text[:MAX_ID_TEXT - 1] + "…"


def factor_text(factor: float | str | None) -> str:
    """``×12.3`` (how many times the band's median), ``NaN/Inf`` for a non-finite figure."""
    if not isinstance(factor, (int, float)) or not math.isfinite(factor):
        return "NaN/Inf"
    return f"×{factor:.3g}"


def owner(name: str) -> str:
    """The module path a parameter belongs to (``""``: the model itself)."""
    return name.rpartition(".")[0]


@dataclass
class _Row:
    """One recorded step as the detector saw it."""

    step: int
    z: np.ndarray  # band widths above the centre (NaN: no band yet or no value)
    factor: np.ndarray | None  # value / band centre (on a flagged step)
    bad: np.ndarray  # non-finite value (always counts as moved)
    values: np.ndarray  # the figures themselves


class SpikeDetector:
    """Rolling bands over every figure of every recorded step; events and their rankings."""

    def __init__(self, settings: SpikeSettings | None = None) -> None:
        self.settings = settings or SpikeSettings()
        self.names: list[str] = []  # parameters, in the order first seen
        self._index: dict[str, int] = {}
        self._bands = RollingBands(self.settings, 2)
        self._rows: deque[_Row] = deque(maxlen=max(self.settings.lookback, self.settings.merge) + 1)
        self._open: SpikeEvent | None = None
        self._since = np.full(0, -1)
        self._onset = np.full(0, -1)
        self._peak = np.full(0, np.nan)
        self._kept: list[_Row] = []
        self._quiet = 0
        self.events: list[SpikeEvent] = []

    def close(self) -> None:
        """Let the kernels' warm-up end (no thread left working after it)."""
        spike_warmup.wait()

    # -- the figures of a step, as one vector ------------------------------------------
    def _columns(self, record) -> None:
        new = [n for n in record.columns()[0] if n not in self._index]
        for name in new:
            self._index[name] = len(self.names)
            self.names.append(name)
        if new:
            self._bands.grow(2 + len(FIGURES) * len(self.names))

    def _vector(self, loss: float | None, record, global_norm: float | None) -> tuple:
        """All figures of the step (NaN: missing) and, per figure, a number above 0 where it
        is NaN/Inf: a signal that is, a parameter's norm whose gradient holds any (its figures
        are over the finite elements); an infinite value is NaN/Inf by itself, except an update
        ratio's (‖θ‖ was 0: missing)."""
        signals = [None if v is None else float(v) for v in (loss, global_norm)]
        nonfinite = [0.0 if v is None or math.isfinite(v) else 1.0 for v in signals]
        if signals[0] is not None and math.isfinite(signals[0]) and signals[0] <= 0:
            signals[0] = None  # the loss's band is for positive losses only
        flat, counts = signals, nonfinite
        if record is not None:  # its columns: no ParamStats built where it keeps arrays
            names, (norms, ratios, nans, infs) = record.columns("norm", "update_ratio",
                                                                "nan_count", "inf_count")
            if len(names) != len(self.names):  # in this detector's order, missing ones None
                at = {n: i for i, n in enumerate(names)}
                rows = [at.get(n) for n in self.names]
                norms, ratios, nans, infs = ([None if i is None else c[i] for i in rows]
                                             for c in (norms, ratios, nans, infs))
                infs = [0 if i is None else v for i, v in zip(rows, infs, strict=True)]
            flat = signals + [x for pair in zip(norms, ratios, strict=True) for x in pair]
            counts = nonfinite + [x for a, b in zip(nans, infs, strict=True) for x in (a or b, 0)]
        size = 2 + len(FIGURES) * len(self.names)
        if len(flat) < size:  # no record: the parameters' figures are missing
            flat, counts = flat + [None] * (size - len(flat)), counts + [0] * (size - len(counts))
        values = np.array(flat, np.float64)  # None becomes NaN
        updates = values[_UPDATE::len(FIGURES)]  # a weight all zeros before the step has an
        updates[np.isinf(updates)] = np.nan  # infinite ratio: new, not NaN/Inf; no band to leave
        return values, np.array(counts, np.float64)

    # -- one step ------------------------------------------------------------------------
    def observe(self, step: int, loss: float | None, record=None,
                global_norm: float | None = None) -> SpikeEvent | None:
        """Score ``step``'s figures; the event it belongs to when flagged, else None."""
        if record is not None:
            self._columns(record)
            if global_norm is None:
                global_norm = record.global_norm
        values, nonfinite = self._vector(loss, record, global_norm)
        since = _fit(self._since, len(values), -1)  # start of each figure's stretch above onset_k
        kernels = spike_warmup.ready()  # never waits: numpy's operations until they are
        if kernels is not None:  # the whole step in two kernel calls and numpy's log
            t, z, centre, bad, moved, flagged, any_flagged = self._bands.observe(
                values, nonfinite, since, step, kernels)
            self._since = since
        else:
            t = log_scale(values)
            z, centre, _ = self._bands.score(t)
            self._bands.push(t)
            bad, moved, flagged, any_flagged = self._flags(values, nonfinite, z, since, step)
        row = _Row(step, z, None, bad, values)
        self._rows.append(row)
        if not any_flagged:
            self._quiet += 1
            if self._open is not None and self._quiet >= self.settings.merge:
                self._open = None
            return None
        with np.errstate(invalid="ignore", over="ignore"):
            row.factor = np.exp(t - centre)
        self._quiet = 0
        event = self._open
        if event is None:
            event = self._open = SpikeEvent(step, step)
            self.events.append(event)
            self._onset = np.full(len(moved), -1)
            self._peak = np.full(len(moved), np.nan)
            self._kept = list(self._rows)
        else:
            self._kept += [r for r in self._rows if r.step > self._kept[-1].step][-MAX_KEPT:]
            del self._kept[:-MAX_KEPT]
        event.until = step
        event.reasons = self._reasons(event, row, flagged)
        self._rank(event, row, moved)
        return event

    def _flags(self, values, nonfinite, z, since, step: int) -> tuple:
        """(bad, moved, flagged, any flagged) of the step's figures by numpy (where the
        kernels cannot load); ``self._since`` updated."""
        bad = (nonfinite > 0) | np.isinf(values)
        with np.errstate(invalid="ignore"):
            moved = bad | (z > self.settings.onset_k)
            flagged = bad | (z > self.settings.k)
        self._since = np.where(moved, np.where(since >= 0, since, step), -1)
        return bad, moved, flagged, bool(flagged.any())

    def _rank(self, event: SpikeEvent, row: _Row, moved: np.ndarray) -> None:
        """Fold a flagged step into the event's onsets and peaks; rank by them."""
        onset = self._onset = _fit(self._onset, len(moved), -1)
        peak = self._peak = _fit(self._peak, len(moved), np.nan)
        start = np.maximum(self._since, event.step - self.settings.lookback)
        onset[:] = np.where(moved & (onset < 0), start, onset)
        peak[:] = np.where(moved, np.fmax(peak, np.where(row.bad, np.inf, row.factor)), peak)
        entries = []
        for column in np.flatnonzero(onset[2:] >= 0) + 2:
            name, figure = self._label(int(column))
            entries.append({"name": name, "figure": figure, "onset": int(onset[column]),
                            "factor": _real(peak[column])})
        params = _best_per_name(entries)
        event.ranking = params[:MAX_RANKED]
        event.modules = _modules(params)
        event.figures = self._figures(self._kept, [e["name"] for e in event.ranking[:TOP_FIGURES]])

    def _label(self, column: int) -> tuple[str, str]:
        """(parameter or signal name, figure) of a column."""
        if column < 2:
            return (LOSS, "value") if column == 0 else (GLOBAL, "value")
        i, f = divmod(column - 2, len(FIGURES))
        return self.names[i], FIGURES[f]

    def _reasons(self, event: SpikeEvent, row: _Row, flagged: np.ndarray) -> list[str]:
        reasons = list(event.reasons)
        for column in (0, 1):
            if flagged[column]:
                what = "NaN/Inf" if row.bad[column] else f"{factor_text(row.factor[column])} " \
                    "its band's median"
                text = f"{self._label(column)[0]} at {what} at step {row.step}"
                if not any(r.startswith(f"{self._label(column)[0]} ") for r in reasons):
                    reasons.append(text)
        params = np.flatnonzero(flagged[2:])
        if len(params) and not any(r.startswith("parameters ") for r in reasons):
            names = list(dict.fromkeys(self._label(2 + int(c))[0] for c in params))
            nonfinite = any(row.bad[2 + c] for c in params)
            named = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            what = "with NaN/Inf" if nonfinite else "above their bands"
            reasons.append(f"parameters {what} at step {row.step}: {named}")
        return reasons

    def _figures(self, rows: list[_Row], names: list[str]) -> dict[str, Any]:
        """The values of the signals and ranked parameters over the steps kept."""
        out: dict[str, Any] = {"steps": [r.step for r in rows]}
        for column, name in ((0, LOSS), (1, GLOBAL)):
            out[name] = [_real(r.values[column]) for r in rows]
        for name in names:
            base = 2 + len(FIGURES) * self._index[name]
            out[name] = {f: [_real(r.values[base + i]) if base + i < len(r.values) else None
                             for r in rows] for i, f in enumerate(FIGURES)}
        return out


def _real(value: float) -> float | None:
    """A JSON-able float: None for NaN, the strings for ±Inf."""
    value = float(value)
    if math.isnan(value):
        return None
    return value if math.isfinite(value) else ("inf" if value > 0 else "-inf")


def _fit(values: np.ndarray, size: int, fill) -> np.ndarray:
    """``values`` padded with ``fill`` to ``size`` (figures of parameters that appeared later)."""
    return values if len(values) >= size else np.concatenate(
        [values, np.full(size - len(values), fill, dtype=values.dtype)])


def _sort_key(entry: dict[str, Any]) -> tuple:
    factor = entry["factor"]
    size = math.inf if isinstance(factor, str) else (factor or 0.0)
    return entry["onset"], -size


def _best_per_name(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per parameter: its earliest onset, then its largest excursion."""
    best: dict[str, dict[str, Any]] = {}
    for e in sorted(entries, key=_sort_key):
        best.setdefault(e["name"], e)
    return sorted(best.values(), key=_sort_key)


def _modules(params: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ranking rolled up to the modules that own the parameters."""
    best: dict[str, dict[str, Any]] = {}
    for e in params:  # already in rank order: the first entry of a module is its best
        path = owner(e["name"])
        if path not in best:
            best[path] = {"name": path, "onset": e["onset"], "factor": e["factor"],
                          "first": e["name"]}
    return sorted(best.values(), key=_sort_key)
