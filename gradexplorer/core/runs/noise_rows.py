"""The noise scale a run recorded (tables ``noise_steps`` and ``noise_params``, written by
``core/watch/noise_watch.py``; docs/noise.md), read and checked as the other tables are: runs
from before them read as none."""

from __future__ import annotations

from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.runs import schema as S
from gradexplorer.core.runs import validate as V
from gradexplorer.core.stats.noise_scale import NoiseFigures, estimate, module_figures


def _has(run) -> bool:
    return "noise_steps" in run._optional and "noise_params" in run._optional


def noise_rows(run, after: int = -1) -> list[dict]:
    """Every recorded step's noise scale after ``after``, oldest first ([] for older runs): a
    dict of ``step`` and ``NOISE_STEP_FIELDS`` (``parts`` backwards of ``batch_small`` samples;
    the whole model's |G_small|², |G_big|², |G|²_est, tr(Σ)_est, B_simple, their EMAs and the
    smoothed B_simple's ±1 standard-error band), and where its small batches came from:
    ``source`` ("micro-batches", "ranks" of DDP or "both") and ``ranks`` (1: micro-batches)."""
    if not _has(run):
        return []
    after = max(-1, min(int(after), V.MAX_STEP))
    rows = run._rows(f"SELECT step, {', '.join(S.NOISE_STEP_FIELDS)} FROM noise_steps "
                     "WHERE step > ? ORDER BY step", (after,))
    sources = _sources(run, after)
    out = []
    for step, *values in rows:
        at = f"{run.where}, table noise_steps at step {V.printable(str(step))[:24]}"
        step = V.count(step, f"{at}, column step", V.MAX_STEP)
        source, ranks = sources.get(step, ("micro-batches", 1))
        out.append({"step": step, **{f: V.figure(v, f"{at}, column {f}")
                                     for f, v in zip(S.NOISE_STEP_FIELDS, values, strict=True)},
                    "source": source, "ranks": ranks})
    return out


def last_noise_step(run, before: int) -> int | None:
    """The latest step before ``before`` with a noise scale (None: none, or an older run)."""
    if not _has(run):
        return None
    found = run._rows("SELECT MAX(step) FROM noise_steps WHERE step < ?",
                      (max(0, min(int(before), V.MAX_STEP)),))
    step = found[0][0] if found else None
    return None if step is None else V.count(step, f"{run.where}, table noise_steps", V.MAX_STEP)


def _sources(run, after: int) -> dict[int, tuple[str, int]]:
    """``{step: (source, ranks)}`` of the steps after ``after`` ({} for runs before the table)."""
    if "noise_sources" not in run._optional:
        return {}
    out = {}
    for step, source, ranks in run._rows("SELECT step, source, ranks FROM noise_sources "
                                         "WHERE step > ?", (after,)):
        at = f"{run.where}, table noise_sources at step {V.printable(str(step))[:24]}"
        if source not in SOURCES:
            raise UserError(f"{at} holds source {V.printable(str(source))[:40]!r} (one of "
                            f"{', '.join(SOURCES)})")
        out[V.count(step, f"{at}, column step", V.MAX_STEP)] = (
            source, V.count(ranks, f"{at}, column ranks", 2**31))
    return out


SOURCES = ("micro-batches", "ranks", "both")


def parts_text(row: dict) -> str:
    """The step's small batches in words: "4 micro-batches of 16", "2 ranks of 8", "2 ranks ×
    2 micro-batches of 8"."""
    ranks, parts, b = row.get("ranks") or 1, row["parts"], row["batch_small"]
    if ranks <= 1:
        return f"{parts} micro-batches of {b}"
    return f"{ranks} ranks of {b}" if parts == ranks else \
        f"{ranks} ranks × {parts // ranks} micro-batches of {b}"


def noise_params(run, step: int) -> dict[str, dict[str, float | None]]:
    """``{parameter: {g_small_sq, g_big_sq, g_sq, trace, snr, snr_ema}}`` at ``step`` ({} where
    the step has no noise scale)."""
    step = V.step_number(step, run.where)
    if not _has(run):
        return {}
    at = f"{run.where}, table noise_params at step {step}"
    out = {}
    for name, *values in run._rows(f"SELECT name, {', '.join(S.NOISE_PARAM_FIELDS)} FROM "
                                   "noise_params WHERE step = ? ORDER BY rowid", (step,)):
        if not isinstance(name, str):
            raise UserError(f"{at} holds a parameter name of type {type(name).__name__}")
        out[name] = {f: V.figure(v, f"{at}, column {f}")
                     for f, v in zip(S.NOISE_PARAM_FIELDS, values, strict=True)}
    return out


def snr_curve(run, name: str) -> tuple[list[int], list[float | None], list[float | None]]:
    """``(steps, SNR, smoothed SNR)`` of parameter ``name`` over the run."""
    if not _has(run):
        return [], [], []
    rows = run._rows("SELECT step, snr, snr_ema FROM noise_params WHERE name = ? ORDER BY step",
                     (name,))
    at = f"{run.where}, table noise_params, parameter {V.printable(name)[:60]!r}"
    return ([V.count(s, f"{at}, column step", V.MAX_STEP) for s, _, _ in rows],
            [V.figure(v, f"{at}, column snr") for _, v, _ in rows],
            [V.figure(v, f"{at}, column snr_ema") for _, _, v in rows])


def module_noise(params: dict[str, dict], parts: int, batch: int) -> dict[str, NoiseFigures]:
    """Every module's figures (``""``: the model) from its parameters' stored |G_small|² and
    |G_big|² (squared norms add over parameters)."""
    per = {name: estimate(p["g_small_sq"], p["g_big_sq"], parts, batch)
           for name, p in params.items()
           if p["g_small_sq"] is not None and p["g_big_sq"] is not None}
    return module_figures(per, parts, batch)
