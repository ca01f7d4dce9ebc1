"""The ``per_sample_norms`` table: each recorded step's per-sample gradient norms (float64
little-endian, one per sample, in batch order) and its largest samples (JSON: index, norm, their
largest modules, the noted batch id). Runs from before it read no rows (``Run.per_sample``)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.persample.record import PerSampleStep
from gradexplorer.core.runs import validate as V

TABLE = "per_sample_norms"
MAX_SAMPLES = 2**26


@dataclass
class RecordedPerSample:
    """A step's per-sample norms as read back from a run: ``norms`` (every sample's),
    ``top`` (the largest, with their ids and largest modules), and the run's settings
    (``reduction``, the modules ``unsupported``, by name and reason)."""

    step: int
    norms: np.ndarray
    top: list[dict[str, Any]]
    reduction: str = "mean"
    unsupported: dict[str, str] | None = None

    def as_step(self) -> PerSampleStep:
        """The figures as a PerSampleStep (its histogram and summary; no per-module columns)."""
        return PerSampleStep(self.norms, {}, self.reduction)


def row(step: int, figures: PerSampleStep, ids: Any) -> tuple:
    """The table's row of ``figures`` (``ids``: the batch's noted ids, or None)."""
    norms = np.ascontiguousarray(figures.norms, dtype="<f8")
    return (step, int(norms.shape[0]), norms.tobytes(),
            json.dumps(figures.top(ids), allow_nan=False, default=str))


def read(step: int, samples: Any, blob: Any, top: Any, where: str, settings: dict
         ) -> RecordedPerSample:
    """A row read back, every value checked (a damaged one is a one-line UserError)."""
    at = f"{where}, table {TABLE} at step {step}"
    samples = V.count(samples, f"{at}, column samples", MAX_SAMPLES)
    if not isinstance(blob, bytes) or len(blob) != 8 * (samples or 0):
        raise UserError(f"{at} is damaged: its norms are not {samples} float64 values")
    entries = V.json_value(top, at)
    if not isinstance(entries, list) or not all(isinstance(e, dict) and isinstance(
            e.get("index"), int) for e in entries):
        raise UserError(f"{at} is damaged: its top samples are not a list of samples")
    norms = np.frombuffer(blob, dtype="<f8").astype(np.float64)
    if np.any(norms[np.isfinite(norms)] < 0):
        raise UserError(f"{at} is damaged: it holds a negative norm")
    for entry in entries:
        if isinstance(entry.get("norm"), str):
            entry["norm"] = float(entry["norm"]) if entry["norm"] in ("nan", "inf") else math.nan
    return RecordedPerSample(step, norms, entries, settings.get("reduction", "mean"),
                             settings.get("unsupported") or {})
