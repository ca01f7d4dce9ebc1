"""The noise scale's lines in ``gradexplorer inspect RUN`` (docs/noise.md)."""

from __future__ import annotations

from gradexplorer.commands.table_text import number
from gradexplorer.core.messages.printable import printable
from gradexplorer.core.runs.noise_rows import (
    last_noise_step,
    module_noise,
    noise_params,
    noise_rows,
    parts_text,
)
from gradexplorer.core.runs.schema import NOISE_PARAM_FIELDS, NOISE_TABLES
from gradexplorer.core.runs.settings_text import noise_cadence_text


def noise_lines(run, step: int) -> list[str]:
    """The step's noise scale in a few lines ([] where it has none): B_simple, raw and smoothed
    with its band, the estimates it comes from, and the noisiest modules."""
    rows = [r for r in noise_rows(run, step - 1) if r["step"] == step]
    cadence = noise_cadence_text(run.settings)  # watch(noise_every=): "" at every step
    if not rows:
        if not cadence:
            return []
        last = last_noise_step(run, step)
        where = "" if last is None else f"; the last at step {last} (`--step {last}`)"
        return [f"noise scale: none at this step; {cadence}{where}"]
    lines = figure_lines(rows[0], noise_params(run, step))
    return lines[:1] + [f"  {cadence}"] + lines[1:] if cadence else lines


def session_noise_lines(noise) -> list[str]:
    """The same lines from a session's step (a ``NoiseStep``, ``result.noise``)."""

    params = {name: dict(zip(NOISE_PARAM_FIELDS, values, strict=True))
              for _, name, *values in noise.param_rows()}
    return figure_lines(dict(zip(NOISE_TABLES["noise_steps"], noise.step_row(), strict=True)),
                        params)


def figure_lines(r: dict, params: dict[str, dict]) -> list[str]:
    """The lines of a step's row (``noise_rows``' dict) and its parameters' (``noise_params``')."""
    band = "" if r["b_simple_low"] is None else \
        f", ±1 s.e. {number(r['b_simple_low'])}..{number(r['b_simple_high'])}"
    lines = [f"noise scale: {parts_text(r)}: B_simple "
             f"{number(r['b_simple'])} this step, smoothed {number(r['b_simple_ema'])}{band} "
             f"(batch now {r['parts'] * r['batch_small']})",
             f"  |G|²_est {number(r['g_sq'])}, tr(Σ)_est {number(r['trace'])} (|G_small|² "
             f"{number(r['g_small_sq'])}, |G_big|² {number(r['g_big_sq'])})"]
    if r["g_sq"] is not None and r["g_sq"] <= 0:
        lines.append("  |G|²_est ≤ 0 this step: the noise hides the gradient at this batch size "
                     "(read the smoothed figure)")
    modules = module_noise(params, r["parts"], r["batch_small"])
    noisy = sorted(((m, f.snr) for m, f in modules.items() if m and f.snr is not None),
                   key=lambda kv: kv[1])[:3]
    if noisy:
        lines.append("  lowest SNR modules: " + ", ".join(
            f"{printable(m)} {number(s)}" for m, s in noisy))
    return lines


def snr_column(run, step: int) -> dict[str, float | None]:
    """``{parameter: SNR}`` at ``step`` ({} where it has no noise scale)."""
    return {name: p["snr"] for name, p in noise_params(run, step).items()}
