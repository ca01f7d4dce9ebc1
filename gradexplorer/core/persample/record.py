"""One step's per-sample gradient norms as recorded and read back (numpy only, no torch)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

TOP_SAMPLES = 8  # samples with the largest gradient norm kept with a step (as spike_log's)
TOP_MODULES = 4  # each top sample's largest modules, named


@dataclass
class PerSampleStep:
    """``norms``: each sample's gradient norm over every supported module (sqrt of the sum of
    the squared per-module norms); ``modules``: module name -> each sample's norm;
    ``reduction``: "mean" or "sum" (docs/per_sample.md); ``failed``: module -> why it has no
    figure this step; ``mixing``: modules that mixed samples (BatchNorm in train mode): the
    figures are then not per-sample gradients (``trusted`` is False)."""

    norms: np.ndarray
    modules: dict[str, np.ndarray] = field(default_factory=dict)
    reduction: str = "mean"
    failed: dict[str, str] = field(default_factory=dict)
    mixing: list[str] = field(default_factory=list)

    @classmethod
    def from_squares(cls, squares: dict[str, np.ndarray], reduction: str,
                     failed: dict[str, str], mixing: list[str]) -> PerSampleStep:
        total = np.sqrt(np.sum(list(squares.values()), axis=0))
        return cls(total, {n: np.sqrt(s) for n, s in squares.items()}, reduction, failed, mixing)

    @property
    def samples(self) -> int:
        return int(self.norms.shape[0])

    @property
    def trusted(self) -> bool:
        return not self.mixing

    def top(self, ids: Any = None, count: int = TOP_SAMPLES) -> list[dict[str, Any]]:
        """The ``count`` samples with the largest norm (NaN/Inf first): index, norm, their
        largest modules, and the id the loop noted for that position (``note_batch``) when the
        ids are a list of the batch's length."""
        values = self.norms.tolist()
        order = sorted(range(len(values)), key=lambda i: math.inf if not math.isfinite(
            values[i]) else values[i], reverse=True)[:count]
        named = isinstance(ids, list) and len(ids) == len(values)
        out = []
        for i in order:
            per_module = sorted(((float(v[i]), n) for n, v in self.modules.items()),
                                key=lambda t: -t[0] if math.isfinite(t[0]) else -math.inf)
            entry = {"index": i, "norm": finite_or_text(values[i]),
                     "modules": {n: finite_or_text(v) for v, n in per_module[:TOP_MODULES]}}
            if named:
                entry["id"] = ids[i]
            out.append(entry)
        return out

    def histogram(self, bins: int = 32) -> tuple[np.ndarray, np.ndarray]:
        """(edges, counts) of the finite norms (log-spaced when they span a decade or more)."""
        finite = self.norms[np.isfinite(self.norms)]
        if finite.size == 0:
            return np.array([0.0, 1.0]), np.zeros(1, dtype=np.int64)
        low, high = float(finite.min()), float(finite.max())
        if low > 0 and high / low >= 10:
            edges = np.geomspace(low, high, bins + 1)
        else:
            edges = np.linspace(low, high if high > low else low + 1.0, bins + 1)
        return edges, np.histogram(finite, edges)[0]

    def summary(self) -> str:
        """``per-sample grad norm over 64 samples: median 0.81, p90 1.9, max 4.2 (sample 17)``."""
        finite = self.norms[np.isfinite(self.norms)]
        if finite.size == 0:
            return f"per-sample grad norm over {self.samples} samples: none finite"
        worst = int(np.nanargmax(np.where(np.isfinite(self.norms), self.norms, np.inf)))
        text = (f"per-sample grad norm over {self.samples} samples: median "
                f"{np.median(finite):.4g}, p90 {np.percentile(finite, 90):.4g}, max "
                f"{self.norms[worst]:.4g} (sample {worst})")
        if self.mixing:
            text += f"; not per-sample: {', '.join(self.mixing)} mixes samples in train mode"
        if self.failed:  # modules whose figure this step could not be made: not in the norms
            text += f"; without {', '.join(self.failed)}: {next(iter(self.failed.values()))}"
        return text


def finite_or_text(value: float) -> float | str:
    return float(value) if math.isfinite(value) else str(value)
