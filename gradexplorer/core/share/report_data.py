"""What the HTML report shows, read from a run directory in a few run-wide queries."""

from __future__ import annotations

import functools
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gradexplorer.core.runs.history import NonFiniteEvent, ParameterSummary, RunHistory
from gradexplorer.core.runs.run import Run
from gradexplorer.core.share.report_noise import NoiseData, gather_noise
from gradexplorer.core.stats.bands import distribution_bands
from gradexplorer.core.stats.curves import thin_steps
from gradexplorer.core.stats.history import HistogramMatrix
from gradexplorer.core.stats.module_rollup import ModuleGradients, module_gradients, owners
from gradexplorer.core.stats.records import whole_figure, whole_figures
from gradexplorer.core.steps.ledger import headline_series

WHICH_GRADIENT = ("each parameter's .grad after backward and before optimizer.step(), as "
                  "gradexplorer.watch read it (figures over finite elements; NaN and ±Inf counted apart)")
HEAT_COLUMNS = 240  # histogram steps drawn per heat map and band chart
CURVE_POINTS = 800  # points of a parameter's norm curve
EVENT_LIMIT = 20_000  # NaN/Inf (step, parameter) pairs read


@dataclass(frozen=True)
class NonFiniteSummary:
    """One parameter's NaN/Inf over the run: steps with any, the first of them, whether any
    of them held a NaN (else only ±Inf)."""

    steps: int
    first: int
    nan: bool = False


@dataclass
class TopParameter:
    """A parameter the report draws: its norm over the run, heat map and bands."""

    name: str
    shape: list[int]
    why: str
    norm_steps: np.ndarray
    norm: np.ndarray
    matrix: HistogramMatrix
    bands: dict[str, np.ndarray]


@dataclass
class ReportData:
    path: str
    model: str
    steps: list[int]
    parameters: list[str]
    settings: dict[str, Any]
    created: str
    wall: np.ndarray
    curves: dict[str, list[float | None]]
    last_step: int
    modules: list[ModuleGradients]
    params: list[tuple[str, dict[str, Any], NonFiniteSummary | None]]
    top: list[TopParameter]
    events: list[NonFiniteEvent]
    events_complete: bool
    origins: dict[int, str] = field(default_factory=dict)
    hooks: dict[str, str] = field(default_factory=dict)
    label: str = ""  # the run's name in legends
    overlays: list[tuple[str, list[int], dict[str, list[float | None]]]] = field(default_factory=list)
    which: str = WHICH_GRADIENT
    largest: dict[str, tuple[float, float]] = field(default_factory=dict)  # run's largest norm, max |g|
    spikes: list = field(default_factory=list)  # SpikeEvent, as ``gradexplorer spikes`` lists them
    modules_nan: set[str] = field(default_factory=set)  # modules with a NaN gradient at the last step
    noise: NoiseData = field(default_factory=NoiseData)  # the noise scale (report_noise.py)

    @property
    def event_steps(self) -> list[int]:
        return sorted({e.step for e in self.events})

    @property
    def event_count(self) -> int:
        return len(self.events)


def _norm_key(value: float | None) -> float:
    return -1.0 if value is None or not math.isfinite(value) else value


def largest_figures(summaries: dict[str, ParameterSummary],
                    bad: dict[str, NonFiniteSummary]) -> dict[str, tuple[float, float]]:
    """Each parameter's largest norm and max |g| over the run: NaN when a step's gradient held
    a NaN, inf when one held ±Inf (never the finite part's figure), else the largest recorded."""
    out = {}
    for name, s in summaries.items():
        b = bad.get(name)
        nan, inf = (b.nan, not b.nan) if b is not None else (False, False)
        out[name] = (whole_figure("norm", s.max_norm, nan, inf), whole_figure("abs_max", s.max_abs, nan, inf))
    return out


def rank_by_largest(params, largest: dict[str, tuple[float, float]]) -> list:
    """``params`` (name, figures, NonFiniteSummary) ranked as the report's table: NaN/Inf ones
    first (earliest first), then by the largest norm over the run."""
    def key(p):
        norm = largest.get(p[0], (math.nan, math.nan))[0]
        if p[2] is not None:
            return (0, p[2].first, 0.0)
        return (1, 0, -(norm if math.isfinite(norm) else -1.0))
    return sorted(params, key=key)


def pick_top(params, count: int, largest: dict[str, tuple[float, float]] | None = None
             ) -> list[tuple[str, str]]:
    """Parameters with NaN/Inf first (earliest first), then the largest norms over the run."""
    ranked = rank_by_largest(params, largest or {})[:count]
    return [(n, f"NaN/Inf first at step {s.first}" if s is not None else "largest norms over the run")
            for n, _, s in ranked]


def snapshot_origins(run: Run, steps: list[int]) -> dict[int, str]:
    """What a snapshot of an event step says about where its NaN/Inf was born."""
    out = {}
    snaps = run.snapshots
    for step in steps:
        if step not in snaps:
            continue
        try:
            manifest = json.loads((snaps[step] / "manifest.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        found = manifest.get("nonfinite_origin")
        if isinstance(found, dict) and found.get("text"):
            out[step] = str(found["text"])
    return out


def nonfinite_summaries(events: list[NonFiniteEvent]) -> dict[str, NonFiniteSummary]:
    out: dict[str, NonFiniteSummary] = {}
    for e in events:
        had = out.get(e.name)
        out[e.name] = NonFiniteSummary((had.steps if had else 0) + 1, had.first if had else e.step,
                                       bool(e.nan_count) or (had is not None and had.nan))
    return out


def histogram_columns(history: RunHistory, name: str, steps: list[int],
                      histogram_steps: Callable[[], list[int]] | None = None) -> HistogramMatrix:
    """``name``'s histograms at up to HEAT_COLUMNS of ``steps``; when the run keeps histograms
    on a cadence (fewer than half of those steps hold one), at its histogram steps instead
    (``histogram_steps()``, by default ``history.histogram_steps``: a caller drawing several
    parameters reads them once)."""
    wanted = thin_steps(steps, HEAT_COLUMNS)
    matrix = history.histogram_matrix(name, wanted)
    if len(matrix.steps) * 2 < len(wanted):
        cadence = (histogram_steps or history.histogram_steps)()
        matrix = history.histogram_matrix(name, thin_steps(cadence, HEAT_COLUMNS))
    return matrix


def created_text(created) -> str:
    """When the run began (its ``created`` time), or "?" when it holds no such time."""
    try:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(float(created)))
    except (TypeError, ValueError, OverflowError, OSError):
        return "?"


def run_labels(runs: list[Run]) -> list[str]:
    """Legend names: each run directory's name, its path where names repeat."""
    names = [r.path.name for r in runs]
    return [str(r.path) if names.count(n) > 1 else n for r, n in zip(runs, names, strict=True)]


def with_headline(steps, wall, curves: dict) -> tuple:
    """A run's step figures with ``headline_norm`` (the global norm as accumulated ÷ scale,
    ``ledger.headline_series``) added where it differs from the applied ``global_norm``: a
    clipped or scaled run's headline curve is the gradient backward made, the applied one
    beside it."""
    headline = headline_series(curves, len(steps))
    applied = np.array(curves.get("global_norm", [None] * len(steps)), dtype=np.float64)  # None: NaN
    if not np.array_equal(headline, applied, equal_nan=True):
        curves = {**curves, "headline_norm": [None if np.isnan(v) else float(v) for v in headline]}
    return steps, wall, curves


def gather(run: Run, top: int = 6, others: list[Run] = (), stage=None) -> ReportData:
    """Everything the report draws, from ``run`` (which must hold a complete step); the step
    curves of ``others`` are overlaid on its own. ``stage(text)`` is told what it reads next."""
    stage = stage or (lambda text: None)
    history = RunHistory(run)
    stage(f"reading the figures of {history.step_count():,} steps")
    steps, wall, curves = with_headline(*history.step_figures())
    steps_list = steps.tolist()
    last = steps_list[-1]
    last_record = run.step_gradients(last)
    stage("finding NaN/Inf events")
    events = history.nonfinite_events(limit=EVENT_LIMIT)
    bad = nonfinite_summaries(events)
    stats_last = {n: whole_figures(s.stats_dict()) for n, s in last_record.params.items() if s.has_grad}
    stage(f"summing up {len(run.parameters):,} parameters over the run")
    largest = largest_figures(history.parameter_summaries(), bad)
    params = [(n, stats_last.get(n, {}), bad.get(n)) for n in run.parameters
              if n in stats_last or n in bad or n in largest]
    modules = sorted(module_gradients(last_record.params).values(),
                     key=lambda m: (m.path != "", -m.nonfinite, -_norm_key(m.norm)))
    shapes = {p["name"]: p["shape"] for p in run.structure.get("parameters", [])}
    curve_steps = thin_steps(steps_list, CURVE_POINTS)
    chosen = pick_top(params, top, largest)
    _, norms = history.stat_series("norm", [n for n, _ in chosen], curve_steps)  # NaN/inf: a gap
    tops = []
    histogram_steps = functools.cache(history.histogram_steps)  # read once for every parameter
    for i, (name, why) in enumerate(chosen):
        stage(f"histograms of {name} ({i + 1} of {len(chosen)} parameters drawn in full)")
        matrix = histogram_columns(history, name, steps_list, histogram_steps)
        bands = distribution_bands(matrix.edges, matrix.counts) if len(matrix.steps) else {}
        tops.append(TopParameter(name, shapes.get(name, []), why, np.asarray(curve_steps),
                                 norms[name], matrix, bands))
    labels = run_labels([run, *others])
    overlays = []
    for label, other in zip(labels[1:], others, strict=True):
        stage(f"the curves of {label}")
        other_steps, _, other_curves = with_headline(*RunHistory(other).step_figures())
        overlays.append((label, other_steps.tolist(), other_curves))
    settings = run.settings
    return ReportData(
        path=str(run.path), model=run.structure.get("model", "?"), steps=steps_list,
        parameters=run.parameters, settings=settings,
        created=created_text(run.meta("created")),
        wall=wall, curves=curves, last_step=last, modules=modules, params=params, top=tops,
        events=events, events_complete=len(events) < EVENT_LIMIT,
        origins=snapshot_origins(run, sorted({e.step for e in events})[:50]),
        hooks=dict(settings.get("hooks") or {}), label=labels[0], overlays=overlays,
        largest=largest, spikes=run.spike_events(), noise=gather_noise(run),
        modules_nan={m for n, s in last_record.params.items() if s.nan_count for m in owners(n)})
